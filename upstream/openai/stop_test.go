package openai_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
	"github.com/svcgw/svcgw/upstream/openai"
)

func TestStopSequences_OverTheProtocolLimit(t *testing.T) {
	// chat-completions takes 4.
	protocoltest.StopsOverTheLimit(t, protocoltest.StopCase{
		New:   func(o upstream.HTTPOptions) upstream.Backend { return openai.New(o) },
		Base:  "/v1",
		Key:   "stop",
		Stops: []string{"<END>", "STOP", "###", "Final Answer:", "Observation:"},
		Sent:  []string{"<END>", "STOP", "###", "Final Answer:"},
		Text:  "Thought: look it up.\nAction: search\n", Seq: "Observation:",
		Usage: llm.Usage{InputTokens: 300, CachedInputTokens: 256, OutputTokens: 25},
		StreamUsage: func(req *llm.Request) llm.Usage {
			// Usage comes only after the finish: the prompt is estimated.
			return llm.Usage{InputTokens: req.InputTokens(),
				OutputTokens: protocoltest.EstimateOf("Thought: look it up.\nAct", "ion: search\nObs", "ervation: Paris is ")}
		},
	})
}

func TestStopSequences_WithinTheLimitAllGoUpstream(t *testing.T) {
	// The upstream applies them: its reply is passed on as it is.
	is := is.New(t)
	f := protocoltest.Replay(t, "stop.json")
	stops := []string{"<END>", "STOP", "###", "Observation:"}
	resp, err := openai.New(protocoltest.Options(f, "/v1")).Complete(protocoltest.Context(t), protocoltest.StopRequest(false, stops...))
	is.NoErr(err)
	is.Equal(protocoltest.SentStops(t, f, "stop"), stops)
	r := protocoltest.ReplyOf(resp)
	is.Equal(r.Finish, llm.FinishStop)
	is.True(strings.Contains(r.Text, "Observation:")) // not the gateway's to cut
}

func TestStopSequences_CutStreamCancelsTheUpstream(t *testing.T) {
	// The upstream would go on writing until its max_tokens; the caller's
	// stream ends at the match, and the upstream call is cancelled.
	is := is.New(t)
	data, err := os.ReadFile(filepath.Join("testdata", "stop.sse"))
	is.NoErr(err)
	head, _, _ := strings.Cut(string(data), `{"content":"the capital`)
	head = head[:strings.LastIndex(head, "data: ")] // up to the delta that completes the sequence
	canceled := make(chan struct{})
	f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		protocoltest.WriteSlowly(w, []byte(head))
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(5 * time.Second):
		}
	})
	s, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), protocoltest.StopRequest(true, "a1", "a2", "a3", "a4", "Observation:"))
	is.NoErr(err)
	evs, err := protocoltest.Drain(s)
	is.NoErr(err)
	r := protocoltest.ReplyOfEvents(t, evs)
	is.Equal(r.Text, "Thought: look it up.\nAction: search\n")
	is.Equal(r.StopSequence, "Observation:")
	select {
	case <-canceled:
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream call was not cancelled at the match")
	}
}
