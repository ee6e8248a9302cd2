package protocoltest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// StopCase is a call with more stop sequences than a protocol accepts: the
// backend sends what the protocol accepts and cuts the reply itself (see
// protocol.Stopped). Its upstream reply, testdata/stop.json and stop.sse
// beside the test, runs past the stop sequence the upstream never got,
// split across two deltas in the stream.
type StopCase struct {
	New   func(upstream.HTTPOptions) upstream.Backend
	Base  string
	Key   string   // where the request body carries stop sequences
	Stops []string // what the caller asked for
	Sent  []string // what the protocol accepts
	Text  string   // the reply, cut before the stop sequence
	Seq   string   // the stop sequence that matched
	Usage llm.Usage
	// StreamUsage is a cut stream's: what the upstream reported by the
	// match, with the output estimated from what was streamed.
	StreamUsage func(req *llm.Request) llm.Usage
}

// StopsOverTheLimit runs c on Complete and on Stream.
func StopsOverTheLimit(t *testing.T, c StopCase) {
	t.Run("complete", func(t *testing.T) {
		is := is.New(t)
		f := Replay(t, "stop.json")
		resp, err := c.New(Options(f, c.Base)).Complete(Context(t), StopRequest(false, c.Stops...))
		is.NoErr(err)                            // complete
		is.Equal(SentStops(t, f, c.Key), c.Sent) // only what the protocol accepts goes upstream
		r := ReplyOf(resp)
		is.Equal(r.Text, c.Text)
		is.Equal(r.Finish, llm.FinishStopSequence)
		is.Equal(r.StopSequence, c.Seq)
		is.Equal(r.Usage, c.Usage) // the upstream generated it all
	})
	t.Run("stream", func(t *testing.T) {
		is := is.New(t)
		f := Replay(t, "stop.sse")
		req := StopRequest(true, c.Stops...)
		s, err := c.New(Options(f, c.Base)).Stream(Context(t), req)
		is.NoErr(err) // stream
		evs, err := Drain(s)
		is.NoErr(err) // drain
		is.Equal(SentStops(t, f, c.Key), c.Sent)
		r := ReplyOfEvents(t, evs)
		is.Equal(r.Text, c.Text)
		is.Equal(r.Finish, llm.FinishStopSequence)
		is.Equal(r.StopSequence, c.Seq)
		is.Equal(r.Usage, c.StreamUsage(req))
	})
}

// StopRuleCase is what a protocol's stop rule sends upstream out of Stops,
// and what it leaves the gateway to apply.
type StopRuleCase struct {
	Name                 string
	Stops, Sent, Gateway []string
}

// CheckStopRule checks rule on each case.
func CheckStopRule(t *testing.T, rule protocol.StopRule, cases []StopRuleCase) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if d := cmp.Diff(c.Sent, rule(c.Stops)); d != "" {
				t.Errorf("sent (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.Gateway, protocol.GatewayStops(rule, c.Stops)); d != "" {
				t.Errorf("gateway (-want +got):\n%s", d)
			}
		})
	}
}

// StopRequest asks for stops on a plain question.
func StopRequest(stream bool, stops ...string) *llm.Request {
	return &llm.Request{Model: "svc-fusion", Stream: stream, Stop: stops,
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France? Think, act, observe.")}}}}
}

// SentStops returns the stop sequences the fake upstream got, at key in
// its request body (stopSequences sits in generationConfig for Gemini).
func SentStops(t *testing.T, f *Fake, key string) []string {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(f.Last(t).Body, &body); err != nil {
		t.Fatal(err)
	}
	if gc, ok := body["generationConfig"]; ok && key == "stopSequences" {
		body = nil
		if err := json.Unmarshal(gc, &body); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	if raw, ok := body[key]; ok {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	return out
}

// EstimateOf is the output estimate of a cut stream that carried deltas:
// llm.TextTokens' rule over the characters the upstream sent up to and
// including the delta that completed the stop sequence.
func EstimateOf(deltas ...string) int {
	n := 0
	for _, d := range deltas {
		n += len([]rune(d))
	}
	return (n + 3) / 4
}
