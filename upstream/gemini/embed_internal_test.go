package gemini

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// embedSeeds are embeddings replies on the edges of what the scanner
// decides.
var embedSeeds = []string{
	`{"embedding":{"values":[0.1,-2e-3,3E+2,0]}}`,
	`{"embeddings":[{"values":[1,0]},{"values":[0,1]}],"usageMetadata":{"promptTokenCount":11}}`,
	`{"embeddings":[{"values":[1],"statistics":{"tokenCount":3,"truncated":false}}],"metadata":{"billableCharacterCount":4}}`,
	`{"embedding":null,"embeddings":null,"usageMetadata":null,"error":null}`,
	`{"embeddings":[null,{"values":null},{}]}`,
	`{"embeddings":[]}`,
	`{"embedding":{"values":[]}}`,
	`{"embedding":{"values":[1e39]}}`,
	`{"embedding":{"values":[1],"values":[2]}}`,
	`{"Embedding":{"Values":[1]}}`,
	`{"embedding":{"values":["1"]}}`,
	`{"embedding":[{"values":[1]}]}`,
	`{"usageMetadata":{"promptTokenCount":1.5}}`,
	`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`,
	`{"embedding":{"values":[1]}} x`,
	` { "embeddings" : [ { "values" : [ 1 , 2 ] } ] } `,
}

// FuzzScanEmbedReply checks that the scanner, wherever it answers, fills
// the reply exactly as jsonv1.Unmarshal does.
func FuzzScanEmbedReply(f *testing.F) {
	for _, b := range recordedEmbedReplies(f) {
		f.Add(b)
	}
	for _, s := range embedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanEmbedReply(t, data)
	})
}

func recordedEmbedReplies(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, name := range []string{"embed.json", "batch_embed.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// checkScanEmbedReply checks the scan of data for values and for text:
// wherever the scanner answers, jsonv1.Unmarshal must fill the reply
// alike, the text kept standing for the values it decodes to.
func checkScanEmbedReply(t *testing.T, data []byte) {
	for _, text := range []bool{false, true} {
		var sc protocol.Scanner
		var got gmEmbedResponse
		if !scanEmbedReply(&sc, data, &got, text) {
			continue
		}
		var want gmEmbedResponse
		if err := jsonv1.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q (text %v): scanned, but jsonv1.Unmarshal fails: %v", data, text, err)
		}
		fix := func(e *gmEmbedding) {
			if e == nil || e.text == nil {
				return
			}
			v, err := llm.DecodeEmbedText(llm.WireGeminiValues, e.text)
			if err != nil || len(v) != e.count {
				t.Fatalf("%q: text %q of %d values decodes to %d: %v", data, e.text, e.count, len(v), err)
			}
			e.Values, e.text, e.count = v, nil, 0
		}
		fix(got.Embedding)
		for i := range got.Embeddings {
			fix(&got.Embeddings[i])
		}
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Fatalf("%q (text %v):\nscanned   %s\nunmarshal %s", data, text, gb, wb)
		}
	}
}

// TestScanEmbedReply runs the seeds, and checks that the scanner takes the
// replies the Gemini API sends.
func TestScanEmbedReply(t *testing.T) {
	for _, s := range embedSeeds {
		checkScanEmbedReply(t, []byte(s))
	}
	usual := append(recordedEmbedReplies(t), []byte(embedSeeds[0]), []byte(embedSeeds[1]), []byte(embedSeeds[2]))
	for _, s := range usual {
		checkScanEmbedReply(t, s)
		var sc protocol.Scanner
		if !scanEmbedReply(&sc, s, &gmEmbedResponse{}, false) || !scanEmbedReply(&sc, s, &gmEmbedResponse{}, true) {
			t.Errorf("%s: not scanned", s)
		}
	}
}
