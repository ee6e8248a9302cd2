package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// hangingBackend answers nothing until the call is canceled: an upstream
// still thinking when the caller leaves.
type hangingBackend struct{ started chan struct{} }

func (b hangingBackend) Complete(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (b hangingBackend) Stream(ctx context.Context, _ *llm.Request) (upstream.Stream, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A caller that drops right after sending its request is no server error:
// it was an ERROR line with status 502 (the upstream call cut short) and a
// 5xx in svcgw_requests_total, canceled=false. It is recorded as canceled,
// at INFO, with status 499 and a status class of its own.
func TestCallerDrop_RecordedAsCanceled(t *testing.T) {
	is := is.New(t)
	var logs syncBuffer
	b := hangingBackend{started: make(chan struct{}, 1)}
	gw := newMetricsGateway(t, MetricsOptions{},
		oaiWithBackend(b, upstream.Limits{ContextLength: 100000, MaxCompletionTokens: 1000}),
		func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})

	for i, body := range []string{chatBody, strings.Replace(chatBody, `{`, `{"stream":true,`, 1)} {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/svc/v1/chat/completions", strings.NewReader(body))
		is.NoErr(err)
		req.Header.Set("Authorization", "Bearer "+gw.Key)
		req.Header.Set("Content-Type", "application/json")
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		<-b.started // the call reached the upstream
		cancel()    // and the caller leaves
		is.True(errors.Is(<-done, context.Canceled))

		// The server ends the call on its own time.
		for deadline := time.Now().Add(5 * time.Second); gw.scrape(t).value("svcgw_requests_total", "status_class", "canceled") < float64(i+1); {
			if time.Now().After(deadline) {
				t.Fatalf("call %d not recorded as canceled:\n%s", i, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	m := gw.scrape(t)
	is.Equal(m.value("svcgw_requests_total", "status_class", "5xx"), 0.0)
	is.Equal(m.value("svcgw_requests_total", "status_class", "canceled"), 2.0)
	lines := logs.String()
	is.True(!strings.Contains(lines, "level=ERROR")) // no server error
	is.Equal(strings.Count(lines, "status=499"), 2)
	for _, line := range strings.Split(lines, "\n") {
		if strings.Contains(line, "msg=request ") {
			is.True(strings.Contains(line, "level=INFO"))
			is.True(strings.Contains(line, "canceled=true"))
		}
	}
}
