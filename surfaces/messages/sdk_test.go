package messages

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/pagination"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"
)

// These helpers read our wire output with the official Go SDK's own types,
// decoder and stream accumulator.

func sdkMessage(t *testing.T, body []byte) anthropic.Message {
	t.Helper()
	var m anthropic.Message
	if err := m.UnmarshalJSON(body); err != nil {
		t.Fatalf("SDK cannot read the message: %v", err)
	}
	return m
}

func sdkModelsPage(t *testing.T, body []byte) pagination.Page[anthropic.ModelInfo] {
	t.Helper()
	var p pagination.Page[anthropic.ModelInfo]
	if err := p.UnmarshalJSON(body); err != nil {
		t.Fatalf("SDK cannot read the models page: %v", err)
	}
	return p
}

// sdkAccumulate runs a stream through the SDK's SSE decoder and
// Message.Accumulate, returning the message and the stream's error.
func sdkAccumulate(t *testing.T, sse []byte) (anthropic.Message, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://gateway/v1/messages", nil)
	res := &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(sse)),
		Request:    req,
	}
	stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	return msg, stream.Err()
}
