package anthropic_test

import (
	"testing"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestConformance(t *testing.T) {
	protocoltest.Conformance(t, protocoltest.Vendor{
		New: func(o upstream.HTTPOptions) upstream.Backend { return anthropic.New(o) },
		First: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
		Errors: []protocoltest.ErrorCase{
			{Name: "prompt too long", Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum (canary)"}}`, Kind: llm.KindInvalidRequest, Message: "the request does not fit the model's context window"},
			{Name: "billing error", Status: 400, Body: `{"type":"error","error":{"type":"billing_error","message":"canary credit"}}`, Kind: llm.KindUpstream, Message: "the gateway's upstream quota is exhausted"},
		},
	})
}
