package openai_test

import (
	"testing"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
	"github.com/svcgw/svcgw/upstream/openai"
)

func TestConformance(t *testing.T) {
	protocoltest.Conformance(t, protocoltest.Vendor{
		New:   func(o upstream.HTTPOptions) upstream.Backend { return openai.New(o) },
		Base:  "/v1",
		First: "data: {\"id\":\"chatcmpl-canary\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
		Errors: []protocoltest.ErrorCase{
			{Name: "quota exhausted is not a rate limit", Status: 429, Body: `{"error":{"message":"canary quota","type":"insufficient_quota","code":"insufficient_quota"}}`, Kind: llm.KindUpstream, Message: "the gateway's upstream quota is exhausted"},
			{Name: "context length exceeded", Status: 400, Body: `{"error":{"message":"canary-backend-model has 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`, Kind: llm.KindInvalidRequest, Message: "the request does not fit the model's context window"},
		},
	})
}
