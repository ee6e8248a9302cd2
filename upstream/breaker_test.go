package upstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

func TestRouter_BreakersAndBlocked(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	down := failing(&llm.Error{Kind: llm.KindOverloaded, Message: "busy"})
	r := newRetryRouter(clock, upstream.Candidate{Name: "def", Backend: answering("ok")})
	r.Set(llm.TypeCode, llm.TierHigh, []upstream.Candidate{{Name: "down", Backend: down}})
	r.Set(llm.TypeCode, llm.TierLow, []upstream.Candidate{{Name: "down", Backend: down}, {Name: "up", Backend: answering("ok")}})

	bs := r.Breakers()
	is.Equal(len(bs), 3) // def, down, up: each once
	is.Equal(bs[0], upstream.Breaker{Candidate: "def"})
	is.Equal(bs[1], upstream.Breaker{Candidate: "down"})
	is.Equal(len(r.Blocked()), 0) // every route has a closed candidate

	// Three failed calls (threshold 3) open "down"'s breaker.
	for range 3 {
		_, _, _ = r.Complete(context.Background(), llm.TypeCode, llm.TierHigh, hello)
	}
	bs = r.Breakers()
	is.Equal(bs[1].Candidate, "down")
	is.True(bs[1].Open)                                                                                         // open after the threshold
	is.Equal(bs[1].Until, clock.Now().Add(30*time.Second))                                                      // for the cooldown
	is.True(bs[1].Failures >= 3)                                                                                // counted
	is.Equal(r.Blocked(), []upstream.Blocked{{Type: llm.TypeCode, Tier: llm.TierHigh, Open: []string{"down"}}}) // code/low still has "up"

	// Reading the breakers never lets a half-open probe through, and
	// after the cooldown the candidate counts as usable again.
	clock.Advance(31 * time.Second)
	is.Equal(len(r.Blocked()), 0)
	is.True(!r.Breakers()[1].Open)
}

func TestRouter_BlockedWithoutCandidates(t *testing.T) {
	is := is.New(t)
	r := upstream.NewRouter(nil)
	r.Set(llm.TypePro, llm.TierMedium, []upstream.Candidate{{Name: "only", Backend: answering("ok")}})
	blocked := r.Blocked()
	// Every generation route but pro/medium has none; embeddings, with no
	// candidate that embeds, are not offered rather than blocked.
	is.Equal(len(blocked), (len(llm.RequestTypes)-1)*len(llm.Tiers)-1)
	is.Equal(len(blocked[0].Open), 0)
}
