package upstream_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// Stop sequences over a protocol's limit: the backend sends what the
// protocol accepts and cuts the reply itself (stop.go). Each case's
// upstream reply (testdata/<vendor>/stop.*) runs past the stop sequence
// the upstream never got, split across two deltas in the stream.

// stopRequest asks for stops on a plain question.
func stopRequest(stream bool, stops ...string) *llm.Request {
	return &llm.Request{Model: "svc-fusion", Stream: stream, Stop: stops,
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France? Think, act, observe.")}}}}
}

// sentStops returns the stop sequences the fake upstream got, at key in
// its request body (stopSequences sits in generationConfig for Gemini).
func sentStops(t *testing.T, f *fakeUpstream, key string) []string {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(f.last(t).Body, &body); err != nil {
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

// estimateOf is the output estimate of a cut stream that carried deltas:
// llm.TextTokens' rule over the characters the upstream sent up to and
// including the delta that completed the stop sequence.
func estimateOf(deltas ...string) int {
	n := 0
	for _, d := range deltas {
		n += len([]rune(d))
	}
	return (n + 3) / 4
}

func TestStopSequences_OverTheProtocolLimit(t *testing.T) {
	tests := []struct {
		name    string
		file    string // testdata/<file>.json and .sse
		backend func(upstream.HTTPOptions) upstream.Backend
		base    string
		key     string   // where the request body carries stop sequences
		stops   []string // what the caller asked for
		sent    []string // what the protocol accepts
		text    string   // the reply, cut before the stop sequence
		seq     string   // the stop sequence that matched
		usage   llm.Usage
		// streamUsage is a cut stream's: what the upstream reported by the
		// match, with the output estimated from what was streamed.
		streamUsage func(req *llm.Request) llm.Usage
	}{
		{
			name:    "chat-completions takes 4",
			file:    "openai/stop",
			backend: func(o upstream.HTTPOptions) upstream.Backend { return upstream.NewOpenAI(o) },
			base:    "/v1", key: "stop",
			stops: []string{"<END>", "STOP", "###", "Final Answer:", "Observation:"},
			sent:  []string{"<END>", "STOP", "###", "Final Answer:"},
			text:  "Thought: look it up.\nAction: search\n", seq: "Observation:",
			usage: llm.Usage{InputTokens: 300, CachedInputTokens: 256, OutputTokens: 25},
			streamUsage: func(req *llm.Request) llm.Usage {
				// Usage comes only after the finish: the prompt is estimated.
				return llm.Usage{InputTokens: req.InputTokens(),
					OutputTokens: estimateOf("Thought: look it up.\nAct", "ion: search\nObs", "ervation: Paris is ")}
			},
		},
		{
			name:    "messages refuses white space only",
			file:    "anthropic/stop",
			backend: func(o upstream.HTTPOptions) upstream.Backend { return upstream.NewAnthropic(o) },
			key:     "stop_sequences",
			stops:   []string{"\n", "END", " \t"},
			sent:    []string{"END"},
			text:    "First line of the answer.", seq: "\n",
			usage: llm.Usage{InputTokens: 2140, CachedInputTokens: 2000, CacheCreationTokens: 100, OutputTokens: 12},
			streamUsage: func(*llm.Request) llm.Usage {
				// message_start reported the input and cache counts.
				return llm.Usage{InputTokens: 2140, CachedInputTokens: 2000, CacheCreationTokens: 100,
					OutputTokens: estimateOf("First line of the ", "answer.", "\nSecond line.")}
			},
		},
		{
			name:    "generate-content takes 5",
			file:    "gemini/stop",
			backend: func(o upstream.HTTPOptions) upstream.Backend { return upstream.NewGemini(o) },
			key:     "stopSequences",
			stops:   []string{"omega", "zeta", "iota", "kappa", "lambda", "delta"},
			sent:    []string{"omega", "zeta", "iota", "kappa", "lambda"},
			text:    "Alpha, beta, gamma, ", seq: "delta",
			usage: llm.Usage{InputTokens: 80, CachedInputTokens: 64, OutputTokens: 9},
			streamUsage: func(*llm.Request) llm.Usage {
				// The chunk that completes the sequence carries the last snapshot.
				return llm.Usage{InputTokens: 80, CachedInputTokens: 64, OutputTokens: 9}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name+", complete", func(t *testing.T) {
			is := is.New(t)
			f := replay(t, tt.file+".json")
			resp, err := tt.backend(options(f, tt.base)).Complete(testCtx(t), stopRequest(false, tt.stops...))
			is.NoErr(err)                              // complete
			is.Equal(sentStops(t, f, tt.key), tt.sent) // only what the protocol accepts goes upstream
			r := replyOf(resp)
			is.Equal(r.Text, tt.text)
			is.Equal(r.Finish, llm.FinishStopSequence)
			is.Equal(r.StopSequence, tt.seq)
			is.Equal(r.Usage, tt.usage) // the upstream generated it all
		})
		t.Run(tt.name+", stream", func(t *testing.T) {
			is := is.New(t)
			f := replay(t, tt.file+".sse")
			req := stopRequest(true, tt.stops...)
			s, err := tt.backend(options(f, tt.base)).Stream(testCtx(t), req)
			is.NoErr(err) // stream
			evs, err := drain(s)
			is.NoErr(err) // drain
			is.Equal(sentStops(t, f, tt.key), tt.sent)
			r := replyOfEvents(t, evs)
			is.Equal(r.Text, tt.text)
			is.Equal(r.Finish, llm.FinishStopSequence)
			is.Equal(r.StopSequence, tt.seq)
			is.Equal(r.Usage, tt.streamUsage(req))
		})
	}
}

func TestStopSequences_WithinTheLimitAllGoUpstream(t *testing.T) {
	// The upstream applies them: its reply is passed on as it is.
	is := is.New(t)
	f := replay(t, "openai/stop.json")
	stops := []string{"<END>", "STOP", "###", "Observation:"}
	resp, err := upstream.NewOpenAI(options(f, "/v1")).Complete(testCtx(t), stopRequest(false, stops...))
	is.NoErr(err)
	is.Equal(sentStops(t, f, "stop"), stops)
	r := replyOf(resp)
	is.Equal(r.Finish, llm.FinishStop)
	is.True(strings.Contains(r.Text, "Observation:")) // not the gateway's to cut

	f = replay(t, "anthropic/stop.json")
	_, err = upstream.NewAnthropic(options(f, "")).Complete(testCtx(t), stopRequest(false, "END", "\nHuman:"))
	is.NoErr(err)
	is.Equal(sentStops(t, f, "stop_sequences"), []string{"END", "\nHuman:"}) // white space around text is fine
}

func TestStopSequences_CutStreamCancelsTheUpstream(t *testing.T) {
	// The upstream would go on writing until its max_tokens; the caller's
	// stream ends at the match, and the upstream call is cancelled.
	is := is.New(t)
	data, err := os.ReadFile(filepath.Join("testdata", "openai", "stop.sse"))
	is.NoErr(err)
	head, _, _ := strings.Cut(string(data), `{"content":"the capital`)
	head = head[:strings.LastIndex(head, "data: ")] // up to the delta that completes the sequence
	canceled := make(chan struct{})
	f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSlowly(w, []byte(head))
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(5 * time.Second):
		}
	})
	s, err := upstream.NewOpenAI(options(f, "/v1")).Stream(testCtx(t), stopRequest(true, "a1", "a2", "a3", "a4", "Observation:"))
	is.NoErr(err)
	evs, err := drain(s)
	is.NoErr(err)
	r := replyOfEvents(t, evs)
	is.Equal(r.Text, "Thought: look it up.\nAction: search\n")
	is.Equal(r.StopSequence, "Observation:")
	select {
	case <-canceled:
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream call was not cancelled at the match")
	}
}
