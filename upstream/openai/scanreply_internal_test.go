package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/svcgw/svcgw/internal/testfill"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// FuzzScanReply checks the reply scanner against the decoder Complete
// falls back to (jsonv1.Unmarshal): whatever reply it accepts, the decoder
// accepts too and decodes to the same oaResponse. Seeded with the recorded
// replies and with replies that tell the two apart if either gets a detail
// wrong.
func FuzzScanReply(f *testing.F) {
	for _, s := range recordedReplies(f) {
		f.Add(s)
	}
	for _, s := range replySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanReply(t, data)
	})
}

// recordedReplies returns the non-streaming replies in testdata.
func recordedReplies(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, name := range []string{"text.json", "stop.json", "tool_call.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// replySeeds are replies on the edges of what the scanner decides.
var replySeeds = []string{
	// bench/mock's reply
	`{"id":"chatcmpl-mock","object":"chat.completion","created":1700000000,"model":"mock-model","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"tok tok tok"}}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`,
	`{"choices":[{"message":{"content":"a\nb \"q\" \u00e9 \ud83d\ude00 \/"},"finish_reason":"length"}]}`,
	`{"choices":[{"message":{"content":"\ud83d"}}]}`,
	`{"choices":[{"message":{"content":"\ud83d\u0041"}}]}`,
	`{"choices":[{"message":{"content":"caf` + "\xe9" + `"}}]}`,
	`{"choices":[{"message":{"content":null,"reasoning_content":"think","reasoning":"think"},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"","refusal":"no"},"finish_reason":"content_filter"}]}`,
	`{"choices":[{"message":{"content":"x","tool_calls":[]},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"x","tool_calls":[ ]},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"x","tool_calls":null},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"x","tool_calls":{}},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"message":{"content":[{"type":"text","text":"parts"}]}}]}`,
	`{"choices":[{"message":{"content":"a"},"finish_reason":"sto\u0070"}]}`,
	`{"choices":[{"message":{"content":"a"},"finish_reason":"odd"}]}`,
	`{"choices":[{"message":{"content":"a"},"finish_reason":null}]}`,
	`{"choices":[{"message":{"content":"a"},"finish_reason":1}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":3,"cache_write_tokens":2,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":4}}}`,
	`{"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":1,"prompt_tokens_details":null,"completion_tokens_details":null}}`,
	`{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":null},"completion_tokens_details":{}}}`,
	`{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}`,
	`{"choices":[],"usage":{"prompt_tokens_details":{"Cached_Tokens":1}}}`,
	`{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1.5}}}`,
	`{"choices":[],"usage":{"prompt_tokens_details":[1]}}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}`,
	`{"choices":[],"usage":null}`,
	`{"Choices":[{"message":{"content":"case"}}]}`,
	`{"choices":[{"Message":{"content":"case"}}]}`,
	`{"choices":[{"message":{"Content":"case"}}]}`,
	`{"choices":[{"message":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"a"},"message":{"refusal":"b"}}]}`,
	`{"choices":[null,{"message":null,"finish_reason":null}]}`,
	`{"choices":null,"usage":null,"error":null}`,
	`{"error":{"message":"boom","type":"server_error","code":500}}`,
	`{"error":"bare"}`,
	`{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}]}}]}`,
	`{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"choices":[]}`,
	`{"choices":[{"message":{"content":"a"}}]} x`,
	`{"choices":[{"message":{"content":"a"}},]}`,
	`{"choices":[{"message":{"content":"a"}}],}`,
	`{"ch\u006fices":[{"message":{"content":"escaped key"}}]}`,
	`{"choices":[{"message":{"content":"a","annotations":[],"audio":null},"finish_reason":"stop","extra":[true,false,null,-1.5e+3,"s",{}]}]}`,
	` { "choices" : [ { "message" : { "content" : "spaced" } , "finish_reason" : "stop" } ] } `,
	`null`,
	`[]`,
	`{}`,
	`{"choices":[{"message":{"content":"tab	in string"}}]}`,
	`{"choices":[{"message":{"content":"\x"}}]}`,
	`{"choices":[{"message":{"content":"\u12"}}]}`,
}

func checkScanReply(t *testing.T, data []byte) {
	var sc protocol.Scanner
	var got oaResponse
	if !scanReply(&sc, data, &got) {
		return
	}
	var want oaResponse
	if err := jsonv1.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: scanned, but jsonv1.Unmarshal fails: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%q:\nscanned   %s\nunmarshal %s", data, gb, wb)
	}
}

// TestScanReply runs the seeds, and checks that the scanner takes the
// replies a plain text completion is made of.
func TestScanReply(t *testing.T) {
	for _, s := range replySeeds {
		checkScanReply(t, []byte(s))
	}
	for _, s := range recordedReplies(t) {
		checkScanReply(t, s)
	}
	plain := append(recordedReplies(t)[:2], []byte(replySeeds[0]), []byte(replySeeds[7]), []byte(replySeeds[18]))
	for _, s := range plain {
		var sc protocol.Scanner
		if !scanReply(&sc, s, &oaResponse{}) {
			t.Errorf("%s: not scanned", s)
		}
	}
}

// TestScan_KnowsEveryMember checks the reply and chunk scanners' key lists
// against their types' JSON names: a scanner skips any other key as a
// member the type does not have, so a member added to a type and not to
// its list would be dropped by the scanner where the decoder reads it.
func TestScan_KnowsEveryMember(t *testing.T) {
	usage := reflect.TypeFor[oaUsage]()
	prompt, _ := usage.FieldByName("PromptTokensDetails")
	completion, _ := usage.FieldByName("CompletionTokensDetails")
	for _, c := range []struct {
		typ  reflect.Type
		keys []string
	}{
		{reflect.TypeFor[oaResponse](), replyKeys},
		{reflect.TypeFor[oaChunk](), replyKeys},
		{reflect.TypeFor[oaChoice](), choiceKeys},
		{reflect.TypeFor[oaChunkChoice](), chunkChoiceKeys},
		{reflect.TypeFor[oaRespMessage](), messageKeys},
		{usage, usageKeys},
		{prompt.Type.Elem(), promptDetails},
		{completion.Type.Elem(), completionDetails},
	} {
		if got, want := slices.Sorted(slices.Values(c.keys)), testfill.JSONNames(c.typ); !slices.Equal(got, want) {
			t.Errorf("%s: the scanner's keys are\n%q\nthe type's members\n%q", c.typ, got, want)
		}
	}
}
