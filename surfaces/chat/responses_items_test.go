package chat

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// A stream sends every delta as it comes, whoever the caller, and hands the
// server its finished items; a later request's references to them resolve
// from the kept items, all looked up at once.
func TestResponsesStream_KeptItems(t *testing.T) {
	is := is.New(t)
	req := &llm.Request{Model: "gpt-5", Stream: true, Tools: []llm.Tool{{Name: "get_weather"}}}
	enc := ResponsesCodec{Sealer: testSealer{}}.newStream(req, "resp_0123456789abcdefghijKLMN", goldenCreated)
	var buf bytes.Buffer
	is.NoErr(enc.Start(&buf))
	var kept []surface.Item
	for _, ev := range completeEvents {
		if ev.Type == llm.EventFinish {
			kept = enc.Items() // as the server asks: at the finish event
		}
		is.NoErr(enc.Event(&buf, ev))
	}

	added := map[string]string{} // id → type, from output_item.added
	deltas := map[string]int{}
	for _, f := range parseSSE(t, buf.Bytes()) {
		var ev struct {
			Type string
			Item struct{ ID, Type string }
		}
		frameJSON(t, f, &ev)
		if ev.Type == "response.output_item.added" {
			added[ev.Item.ID] = ev.Item.Type
		}
		deltas[ev.Type]++
	}
	// One delta per upstream delta: nothing held back until an item ends.
	is.Equal(deltas["response.reasoning_summary_text.delta"], 2)
	is.Equal(deltas["response.output_text.delta"], 2)
	is.Equal(deltas["response.function_call_arguments.delta"], 2)

	// Every item announced is kept under the id it was announced with.
	is.Equal(len(kept), 3)
	for _, it := range kept {
		is.True(added[it.ID] != "")
	}
	is.Equal(added[kept[0].ID], "reasoning")
	is.Equal(added[kept[1].ID], "message")

	// The next turn, as the AI SDK sends it with store left true: the
	// reasoning and the answer by reference, the call in full.
	body := `{"model":"gpt-5","input":[{"role":"user","content":"Weather in Paris?"},
		{"type":"reasoning","id":"rs_68b1f2c3d4e5f6a7b8c9d0e1f2a3b4c5","summary":[]},
		{"type":"item_reference","id":"` + kept[0].ID + `"},{"type":"item_reference","id":"` + kept[1].ID + `"},
		{"type":"function_call","call_id":"call_7Qx","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_7Qx","output":"sunny"}]}`
	var asked [][]string
	source := func(_ context.Context, ids []string) (map[string][]byte, error) {
		asked = append(asked, ids)
		m := map[string][]byte{}
		for _, it := range kept {
			m[it.ID] = it.Data
		}
		return m, nil
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	got, err := ResponsesCodec{Sealer: testSealer{}}.DecodeRequestItems(r, []byte(body), source)
	is.NoErr(err)
	is.Equal(len(asked), 1)                              // one look-up for the request
	is.Equal(asked[0], []string{kept[0].ID, kept[1].ID}) // not another API's reasoning id
	is.Equal(len(got.Messages), 3)
	turn := got.Messages[1].Parts[1:] // after the other API's reasoning, replayed as sent
	is.Equal(turn[0].Type, llm.PartReasoning)
	is.Equal(turn[0].Text, "The user wants the weather.")
	is.Equal(turn[0].Signature, "sig-opaque")
	is.Equal(turn[1].Text, "Let me check.")
	is.Equal(turn[2].ToolCall.ID, "call_7Qx")

	t.Run("not kept for this account: a clear 400", func(t *testing.T) {
		is := is.New(t)
		none := func(context.Context, []string) (map[string][]byte, error) { return map[string][]byte{}, nil }
		_, err := ResponsesCodec{Sealer: testSealer{}}.DecodeRequestItems(r, []byte(body), none)
		var le *llm.Error
		is.True(errors.As(err, &le))
		is.Equal(le.Kind, llm.KindInvalidRequest)
		is.Equal(le.Param, "input[3].id") // the message; the reasoning is dropped
		is.True(strings.Contains(le.Message, "cannot be resolved"))
	})

	t.Run("the store's failure is the request's", func(t *testing.T) {
		is := is.New(t)
		down := &llm.Error{Kind: llm.KindUnavailable, Message: "down"}
		failing := func(context.Context, []string) (map[string][]byte, error) { return nil, down }
		_, err := ResponsesCodec{Sealer: testSealer{}}.DecodeRequestItems(r, []byte(body), failing)
		is.True(errors.Is(err, down))
	})
}

// testSealer opens nothing: every id is a plain one, as a stream's are.
type testSealer struct{}

func (testSealer) Seal(_ string, plaintext []byte) string { return string(plaintext) }
func (testSealer) Open(string, string) ([]byte, error)    { return nil, errors.New("not sealed") }
