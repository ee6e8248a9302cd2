package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/seal"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// deltaCounter counts the deltas of the last stream it relayed: the frames
// the upstream sent that carry text, reasoning or arguments.
type deltaCounter struct {
	upstream.Backend
	deltas atomic.Int64
}

func (b *deltaCounter) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	b.deltas.Store(0)
	st, err := b.Backend.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &countedStream{Stream: st, n: &b.deltas}, nil
}

type countedStream struct {
	upstream.Stream
	n *atomic.Int64
}

func (s *countedStream) Next() bool {
	if !s.Stream.Next() {
		return false
	}
	switch ev := s.Stream.Event(); ev.Type {
	case llm.EventTextDelta, llm.EventReasoningDelta, llm.EventToolCallDelta:
		if ev.Text != "" {
			s.n.Add(1)
		}
	}
	return true
}

// aiSDKTurn is one streamed turn as the AI SDK's OpenAI provider reads it:
// the items by the id output_item.added announced, each item's deltas.
type aiSDKTurn struct {
	added  []responsesItem
	done   []responsesItem
	deltas int
}

func aiSDKStream(t *testing.T, gw *testGateway, body string) aiSDKTurn {
	t.Helper()
	resp, raw := gw.do(t, http.MethodPost, "/svc/v1/responses", body, "User-Agent", aiSDKUserAgent)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", gw.URL, resp.StatusCode, raw)
	}
	var turn aiSDKTurn
	for _, data := range oaiSSE(t, raw) {
		var ev struct {
			Type string
			Item responsesItem
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "response.output_item.added":
			turn.added = append(turn.added, ev.Item)
		case "response.output_item.done":
			turn.done = append(turn.done, ev.Item)
		case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.function_call_arguments.delta":
			turn.deltas++
		}
	}
	return turn
}

// aiSDKConversation is a streamed tool loop as streamText runs it with the
// AI SDK's default OpenAI provider (the Responses API, store left true):
// the call with reasoning; then the reasoning by reference, the call in
// full and its output; then the answer by reference. first answers the
// first turn, second the others.
func aiSDKConversation(t *testing.T, first, second *testGateway, upFirst, upSecond *deltaCounter, rec *recordingBackend) {
	is := is.New(t)
	tools := `"tools":[{"type":"function","name":"weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}]`
	opts := `"reasoning":{"effort":"medium","summary":"auto"},"stream":true,` + tools
	user := `{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}`

	turn1 := aiSDKStream(t, first, `{"model":"gpt-5","input":[`+user+`],`+opts+`}`)
	is.Equal(len(turn1.added), 2)
	is.Equal(turn1.added[0].Type, "reasoning")
	is.Equal(turn1.added[1].Type, "function_call")
	is.True(upFirst.deltas.Load() >= 2)                   // the upstream streamed in several frames
	is.True(int64(turn1.deltas) >= upFirst.deltas.Load()) // and each reached the caller as it came
	for i := range turn1.added {
		is.Equal(turn1.added[i].ID, turn1.done[i].ID) // the id announced is the id kept
	}
	call := turn1.done[1]

	step2 := `{"model":"gpt-5","input":[` + user + `,
		{"type":"item_reference","id":"` + turn1.added[0].ID + `"},
		{"type":"function_call","call_id":"` + call.CallID + `","name":"weather","arguments":` + strconv.Quote(call.Arguments) + `},
		{"type":"function_call_output","call_id":"` + call.CallID + `","output":"sunny"}],` + opts + `}`
	turn2 := aiSDKStream(t, second, step2)
	msgs := rec.lastRequest().Messages
	is.Equal(msgs[1].Parts[0].Type, llm.PartReasoning) // the reasoning, rebuilt from the kept item
	is.Equal(msgs[1].Parts[0].Text, turn1.done[0].Summary[0].Text)
	is.True(msgs[1].Parts[0].Signature != "") // with its signature, opened
	is.Equal(msgs[1].Parts[1].ToolCall.ID, call.CallID)
	answer := turn2.done[len(turn2.done)-1]
	is.Equal(answer.Type, "message")
	is.True(strings.Contains(answer.Content[0].Text, "sunny"))
	is.True(int64(turn2.deltas) >= upSecond.deltas.Load())

	// The next user turn replays the answer by reference too.
	step3 := `{"model":"gpt-5","input":[` + user + `,
		{"type":"item_reference","id":"` + turn1.added[0].ID + `"},
		{"type":"function_call","call_id":"` + call.CallID + `","name":"weather","arguments":` + strconv.Quote(call.Arguments) + `},
		{"type":"function_call_output","call_id":"` + call.CallID + `","output":"sunny"},
		{"type":"item_reference","id":"` + turn2.added[len(turn2.added)-1].ID + `"},
		{"role":"user","content":[{"type":"input_text","text":"Thanks!"}]}],` + opts + `}`
	aiSDKStream(t, second, step3)
	msgs = rec.lastRequest().Messages
	is.Equal(msgs[len(msgs)-2].Role, llm.RoleAssistant)
	is.Equal(msgs[len(msgs)-2].Parts[len(msgs[len(msgs)-2].Parts)-1].Text, answer.Content[0].Text)

	// Another account cannot replay them: a clear 400 naming the item.
	other, _ := first.newKey(t, "other", "10")
	resp, raw := first.do(t, http.MethodPost, "/svc/v1/responses", `{"model":"gpt-5","input":[`+user+`,{"type":"item_reference","id":"`+turn2.added[len(turn2.added)-1].ID+`"}]}`,
		"Authorization", "Bearer "+other)
	is.Equal(resp.StatusCode, http.StatusBadRequest)
	_, param, _ := oaiEnvelope(t, raw)
	is.Equal(*param, "input[1].id")
}

// newItemsGateway is a gateway on st whose calls go to the fixture through
// a delta counter and a recorder.
func newItemsGateway(t *testing.T, st store.DB, box *seal.Box) (*testGateway, *deltaCounter, *recordingBackend) {
	t.Helper()
	fx := fixture.New(fixture.Options{})
	counter := &deltaCounter{Backend: fx}
	rec := &recordingBackend{Backend: counter}
	opts := []gatewayOption{oaiWithBackend(rec, fx.Limits())}
	if st != nil {
		opts = append(opts, withStore(st), func(o *Options) { o.Sealer = box })
	}
	return newTestGateway(t, opts...), counter, rec
}

// The AI SDK's default OpenAI provider streams token by token and replays
// streamed items by reference, with nothing in the request (or its
// User-Agent) to tell the two apart: each streamed item is kept with the
// call's record and a reference finds it. It was one delta holding the
// whole text, items held back until complete.
func TestClients_AISDKStreamedConversation(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		gw, counter, rec := newItemsGateway(t, nil, nil)
		aiSDKConversation(t, gw, gw, counter, counter, rec)
	})
	t.Run("postgres, the next turns at another instance", func(t *testing.T) {
		ctx := context.Background()
		dsn := pgtest.DSN(t)
		// Short leases: each instance's heartbeat soon counts the other,
		// and then leases it only its share of the balance.
		opts := store.Options{LeaseTTL: 900 * time.Millisecond}
		stA, err := postgres.Open(ctx, dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		stB, err := postgres.Open(ctx, dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		// Both instances seal with the database's keys, as svcgw serve does.
		keys, err := stA.SealKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sk := make([]seal.Key, len(keys))
		for i, k := range keys {
			sk[i] = seal.Key{ID: k.ID, Secret: k.Secret}
		}
		box, err := seal.New(sk)
		if err != nil {
			t.Fatal(err)
		}
		a, counterA, _ := newItemsGateway(t, stA, box)
		b, counterB, recB := newItemsGateway(t, stB, box)
		b.Key = a.Key // one caller, two instances
		for deadline := time.Now().Add(10 * time.Second); stA.Instances() < 2 || stB.Instances() < 2; {
			if time.Now().After(deadline) {
				t.Fatalf("the instances do not see each other: %d, %d", stA.Instances(), stB.Instances())
			}
			time.Sleep(50 * time.Millisecond)
		}
		aiSDKConversation(t, a, b, counterA, counterB, recB)
	})
}
