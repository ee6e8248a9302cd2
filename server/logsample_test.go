package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// A 401 flood writes a few access lines and then one line a second with a
// count, not one line per request; other statuses are not held back.
func TestAccessLog_FloodOfCallerFaultsIsSampled(t *testing.T) {
	is := is.New(t)
	var mu sync.Mutex
	var logs bytes.Buffer
	gw := newTestGateway(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	})
	const flood = 300
	for range flood {
		resp, _ := gw.do(t, http.MethodGet, "/svc/v1/credits", "", "Authorization", "Bearer llm_live_wrong")
		is.Equal(resp.StatusCode, http.StatusUnauthorized)
	}
	resp, _ := gw.do(t, http.MethodGet, "/svc/v1/credits", "")
	is.Equal(resp.StatusCode, http.StatusOK)

	count := func() (lines401, summarized, ok int) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range strings.Split(logs.String(), "\n") {
			switch {
			case strings.Contains(l, "msg=request ") && strings.Contains(l, "status=401"):
				lines401++
			case strings.Contains(l, "requests not logged one by one") && strings.Contains(l, "status=401"):
				var n int
				if i := strings.Index(l, "requests="); i >= 0 {
					_, _ = fmt.Sscan(l[i+len("requests="):], &n)
				}
				summarized += n
			case strings.Contains(l, "msg=request ") && strings.Contains(l, "status=200"):
				ok++
			}
		}
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines, summarized, ok := count()
		if lines+summarized == flood || time.Now().After(deadline) {
			is.True(lines >= 1)               // the first occurrence is logged at once
			is.True(lines <= 2*sampleBurst)   // a burst a second, not one per request
			is.Equal(lines+summarized, flood) // and every refusal is counted
			is.Equal(ok, 1)                   // other statuses are not sampled
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}
