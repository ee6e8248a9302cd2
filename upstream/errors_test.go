package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

func TestRetryable(t *testing.T) {
	is := is.New(t)
	is.True(!upstream.Retryable(nil))
	is.True(!upstream.Retryable(context.Canceled))
	is.True(!upstream.Retryable(fmt.Errorf("post: %w", context.DeadlineExceeded)))
	is.True(!upstream.Retryable(llm.InvalidParam("x", "bad")))
	is.True(upstream.Retryable(&llm.Error{Kind: llm.KindOverloaded}))
	is.True(!upstream.Retryable(errors.New("something else")))
}

// Which upstream HTTP statuses are retried: waiting may help with a 5xx,
// 408 and 429, never with a rejected request, credentials or quota.
func TestErrorFromStatus_Retryable(t *testing.T) {
	for _, tc := range []struct {
		status int
		retry  bool
	}{
		{500, true}, {502, true}, {503, true}, {504, true}, {529, true}, {408, true}, {429, true},
		{400, false}, {401, false}, {402, false}, {403, false}, {404, false}, {413, false}, {422, false},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			is := is.New(t)
			err := upstream.ErrorFromStatus(tc.status, http.Header{}, []byte("body"), upstream.ErrorHint{})
			is.Equal(upstream.Retryable(err), tc.retry)
		})
	}
}
