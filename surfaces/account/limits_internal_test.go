package account

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

func TestBegin_PerKeyLimit(t *testing.T) {
	is := is.New(t)
	var refused []*llm.Error
	h := New(nil, nil, func(w http.ResponseWriter, _ *http.Request, err error) {
		var e *llm.Error
		is.True(errors.As(err, &e)) // always an *llm.Error
		refused = append(refused, e)
		w.WriteHeader(e.Kind.Status())
	}, Limits{PerKey: 2, Concurrent: 8})
	a, b := store.Key{ID: "key_a"}, store.Key{ID: "key_b"}
	begin := func(k store.Key) (func(), int) {
		rec := httptest.NewRecorder()
		_, end, ok := h.begin(rec, httptest.NewRequest("GET", "/svc/v1/usage", nil), k)
		if !ok {
			return nil, rec.Code
		}
		return end, 0
	}
	end1, _ := begin(a)
	end2, _ := begin(a)
	is.True(end1 != nil && end2 != nil) // two in progress
	_, status := begin(a)
	is.Equal(status, 429) // a third is refused at once
	is.Equal(len(refused), 1)
	is.Equal(refused[0].Kind, llm.KindRateLimited)
	is.Equal(refused[0].RetryAfter, time.Second)
	is.Equal(refused[0].Message, "This API key already has 2 account requests in progress, the most it may have at once; retry when one has finished.")

	endB, _ := begin(b)
	is.True(endB != nil) // another key is not held back by the first
	end1()
	end3, _ := begin(a)
	is.True(end3 != nil) // room again once one has finished
	end2()
	end3()
	endB()
	is.Equal(len(h.inflight.n), 0) // nothing left behind
}

func TestBegin_Turns(t *testing.T) {
	is := is.New(t)
	var refused []*llm.Error
	h := New(nil, nil, func(w http.ResponseWriter, _ *http.Request, err error) {
		var e *llm.Error
		is.True(errors.As(err, &e)) // always an *llm.Error
		refused = append(refused, e)
		w.WriteHeader(e.Kind.Status())
	}, Limits{Concurrent: 1, Timeout: 300 * time.Millisecond, Share: 1})
	begin := func(k store.Key) (func(), int) {
		rec := httptest.NewRecorder()
		_, end, ok := h.begin(rec, httptest.NewRequest("GET", "/svc/v1/usage", nil), k)
		if !ok {
			return nil, rec.Code
		}
		return end, 0
	}
	endA, _ := begin(store.Key{ID: "key_a"})
	is.True(endA != nil) // served
	_, status := begin(store.Key{ID: "key_b"})
	is.Equal(status, 504) // no turn within the time limit: another key's request holds the only one
	is.Equal(refused[0].Kind, llm.KindTimeout)

	done := make(chan func())
	go func() {
		end, _ := begin(store.Key{ID: "key_b"})
		done <- end
	}()
	time.Sleep(10 * time.Millisecond)
	endA() // its turn passes on
	endB := <-done
	is.True(endB != nil) // served once the turn was free
	endB()
	is.Equal(len(h.inflight.n), 0)
	is.Equal(len(h.turns), 0)
}

func TestBegin_TurnsRest(t *testing.T) {
	is := is.New(t)
	h := New(nil, nil, func(w http.ResponseWriter, _ *http.Request, err error) {
		t.Errorf("refused: %v", err)
	}, Limits{Concurrent: 1, Timeout: 10 * time.Second, Share: 0.5})
	begin := func(id string) func() {
		_, end, ok := h.begin(httptest.NewRecorder(), httptest.NewRequest("GET", "/svc/v1/usage", nil), store.Key{ID: id})
		is.True(ok)
		return end
	}

	// Alone, a request's turn is free again at once.
	end := begin("key_a")
	time.Sleep(50 * time.Millisecond)
	end()
	is.Equal(len(h.turns), 0) // no rest without a queue

	// With another request waiting, the turn rests (as long again at a
	// share of one half) before that request is served.
	endA := begin("key_a")
	got := make(chan time.Time)
	go func() {
		endB := begin("key_b")
		got <- time.Now()
		endB()
	}()
	for h.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a request that takes 200ms
	ended := time.Now()
	endA()
	servedB := <-got
	is.True(servedB.Sub(ended) >= 150*time.Millisecond) // the waiting request was served after the rest
}
