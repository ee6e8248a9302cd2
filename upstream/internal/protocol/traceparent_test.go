package protocol

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/svcgw/svcgw/upstream"
)

// TestClient_Traceparent: a request sends the traceparent its context
// carries (a traced attempt to an upstream that allows it), and none
// otherwise; the backend's shared header is never changed.
func TestClient_Traceparent(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL}, srv.URL, nil)
	header := http.Header{"Content-Type": {"application/json"}}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, ctx := range []context.Context{upstream.WithTraceparent(context.Background(), tp), context.Background()} {
		c, resp, err := h.Post(ctx, srv.URL+"/v1/chat/completions", header, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c.Release()
	}
	if len(got) != 2 || got[0] != tp || got[1] != "" {
		t.Errorf("the upstream saw traceparents %q, want [%q, \"\"]", got, tp)
	}
	if _, ok := header["Traceparent"]; ok || len(header) != 1 {
		t.Errorf("the shared header was changed: %v", header)
	}
}
