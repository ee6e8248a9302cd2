package upstream_test

import (
	"context"
	"errors"
	"fmt"
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
