package gemini_test

import (
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestConformance(t *testing.T) {
	protocoltest.Conformance(t, protocoltest.Vendor{
		New:   func(o upstream.HTTPOptions) upstream.Backend { return gemini.New(o) },
		First: "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hi\"}]},\"index\":0}]}\n\n",
		Errors: []protocoltest.ErrorCase{
			{Name: "bad key is a 400 with API_KEY_INVALID", Status: 400, Body: `{"error":{"code":400,"message":"API key not valid (canary)","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, Kind: llm.KindUpstream, Message: "the gateway's upstream credentials were rejected"},
			{Name: "RetryInfo gives the delay", Status: 429, Body: `{"error":{"code":429,"message":"canary quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`, Kind: llm.KindRateLimited, RetryAfter: 30 * time.Second, Retryable: true, Message: "the upstream model is rate limited; retry later"},
			{Name: "error wrapped in an array", Status: 503, Body: `[{"error":{"code":503,"message":"The model canary is overloaded.","status":"UNAVAILABLE"}}]`, Kind: llm.KindOverloaded, Retryable: true, Message: "the upstream model is overloaded; retry later"},
		},
	})
}
