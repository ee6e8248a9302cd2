package chat

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/svcgw/svcgw/internal/testfill"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// FuzzScanChat checks the request scanner against surface.Decode: whatever
// body it accepts, surface.Decode accepts too and decodes to the same
// chatRequest. Seeded with the request files, the decode tests' bodies and
// bodies that tell the two apart if either gets a detail wrong.
func FuzzScanChat(f *testing.F) {
	addChatSeeds(f)
	for _, s := range scanChatSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanChat)
}

// scanChatSeeds are bodies on the edges of what the scanner decides.
var scanChatSeeds = []string{
	// bench/load's request
	`{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":64}`,
	`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"a\nb \"q\" \u00e9 \ud83d\ude00 \/","name":"n"}],"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"m","messages":[{"role":"tool","content":"42","tool_call_id":"call_1"}],"temperature":0.7,"top_p":1,"presence_penalty":-0.5,"frequency_penalty":2e-1,"seed":-3,"n":1,"user":"u","prompt_cache_key":"k","reasoning_effort":"low","logprobs":true,"top_logprobs":2,"parallel_tool_calls":false,"max_completion_tokens":5}`,
	`{"model":null,"messages":null,"stream":null,"stream_options":null,"max_tokens":null,"temperature":null,"seed":null,"user":null,"logprobs":null,"parallel_tool_calls":null}`,
	`{"model":"m","messages":[{"role":null,"content":null,"name":null,"tool_call_id":null}]}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","messages":[null]}`,
	`{"model":"m","messages":[1]}`,
	`{"model":"m","messages":{}}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"parts"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":{}}]}`,
	`{"model":"m","messages":[{"role":"user","content":1}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","cache_control":{"type":"ephemeral"}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","extra":[true,{"a":null}],"Extra":1}]}`,
	`{"model":"m","messages":[{"Role":"user","content":"x"}]}`,
	`{"Model":"m","messages":[]}`,
	`{"model":"m","model":"n"}`,
	`{"model":"m","messages":[{"role":"user","role":"system"}]}`,
	`{"model":"m","stream_options":{"include_usage":true,"include_usage":false}}`,
	`{"model":"m","stream_options":{"Include_Usage":true}}`,
	`{"model":"m","stream_options":{"include_usage":null,"other":1}}`,
	`{"model":"m","stream_options":[]}`,
	`{"model":"m","max_tokens":1.0}`,
	`{"model":"m","max_tokens":1e2}`,
	`{"model":"m","max_tokens":-0}`,
	`{"model":"m","max_tokens":99999999999999999999}`,
	`{"model":"m","max_tokens":"64"}`,
	`{"model":"m","temperature":1e400}`,
	`{"model":"m","temperature":-0.0}`,
	`{"model":"m","temperature":"0.5"}`,
	`{"model":"m","seed":9223372036854775807}`,
	`{"model":"m","seed":9223372036854775808}`,
	`{"model":"m","stream":"true"}`,
	`{"model":"m","stream":1}`,
	`{"model":"m","tools":[],"messages":[]}`,
	`{"model":"m","stop":"x"}`,
	`{"model":"m","logit_bias":null}`,
	`{"model":"m","maxtokens":5,"max-tokens":6,"MAX_TOKENS":7}`,
	`{"model":"caf` + "\xe9" + `"}`,
	`{"model":"\ud83d"}`,
	`{"mod\u0065l":"m"}`,
	`{"model":"m"} x`,
	`{"model":"m",}`,
	`{"model":"m","messages":[{"role":"user","content":"x"},]}`,
	`null`,
	`[]`,
	`{}`,
	` { "model" : "m" , "messages" : [ { "role" : "user" , "content" : "spaced" } ] } `,
}

func checkScanChat(t *testing.T, body []byte) {
	var sc llm.JSONScanner
	var got chatRequest
	if !scanChat(&sc, body, &got) {
		return
	}
	var want chatRequest
	if err := surface.Decode(body, &want, surface.EncodingJSON); err != nil {
		t.Fatalf("%q: scanned, but surface.Decode fails: %v", body, err)
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%q:\nscanned %s\ndecoded %s", body, gb, wb)
	}
}

// TestScanChat runs the seeds, and checks that the scanner takes the
// plain requests it is for.
func TestScanChat(t *testing.T) {
	for _, s := range scanChatSeeds {
		checkScanChat(t, []byte(s))
	}
	for _, tc := range chatDecodeCases {
		checkScanChat(t, []byte(tc.body))
	}
	for _, s := range scanChatSeeds[:5] {
		var sc llm.JSONScanner
		if !scanChat(&sc, []byte(s), &chatRequest{}) {
			t.Errorf("%s: not scanned", s)
		}
	}
}

// TestScanChat_KnowsEveryMember checks chatKeys, messageKeys and
// streamOptionsKeys against chatRequest's, chatMessage's and
// stream_options' JSON names: scanChat skips any other key
// as a member the request does not have, so a member added to the types and
// not to the lists would be dropped by the scanner where surface.Decode
// reads it.
func TestScanChat_KnowsEveryMember(t *testing.T) {
	streamOptions, _ := reflect.TypeFor[chatRequest]().FieldByName("StreamOptions")
	for _, c := range []struct {
		typ  reflect.Type
		keys []string
	}{
		{reflect.TypeFor[chatRequest](), chatKeys},
		{reflect.TypeFor[chatMessage](), messageKeys},
		{streamOptions.Type.Elem(), streamOptionsKeys},
	} {
		if got, want := slices.Sorted(slices.Values(c.keys)), testfill.JSONNames(c.typ); !slices.Equal(got, want) {
			t.Errorf("%s: the scanner's keys are\n%q\nthe type's members\n%q", c.typ, got, want)
		}
	}
}

// TestDecodeChat_Allocations bounds what the usual request costs to
// decode: the canonical request, its messages and their strings. The
// chatRequest it is read into stays on the stack (the fallback decodes
// into one of its own): 18 allocations when it moved to the heap.
func TestDecodeChat_Allocations(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		if _, err := decodeChat(benchBody); err != nil {
			t.Fatal(err)
		}
	}); n > 17 {
		t.Errorf("decodeChat: %v allocations, want at most 17", n)
	}
}
