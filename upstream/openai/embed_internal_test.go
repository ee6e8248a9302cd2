package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// embedReplyOf is an embeddings reply of n vectors of dims floats, as
// text (the shortest form that reads back exactly) or as base64.
func embedReplyOf(n, dims int, base64 bool) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	var resp struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Usage  map[string]int `json:"usage"`
	}
	resp.Object = "list"
	for i := range n {
		v := make([]float32, dims)
		for k := range v {
			v[k] = float32(rng.NormFloat64() / 40)
		}
		var emb any = json.RawMessage(floatsJSON(v))
		if base64 {
			emb = base64Vector(v)
		}
		resp.Data = append(resp.Data, item{Object: "embedding", Index: i, Embedding: emb})
	}
	resp.Usage = map[string]int{"prompt_tokens": n * 8, "total_tokens": n * 8}
	b, _ := json.Marshal(resp)
	return b
}

func floatsJSON(v []float32) []byte {
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

func base64Vector(v []float32) string {
	raw := make([]byte, 0, 4*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

func TestEmbedReply_FloatsAndBase64Agree(t *testing.T) {
	floats, err := embedReply(embedReplyOf(3, 64, false), llm.WireNone)
	if err != nil {
		t.Fatal(err)
	}
	b64, err := embedReply(embedReplyOf(3, 64, true), llm.WireNone)
	if err != nil {
		t.Fatal(err)
	}
	for i := range floats.Vectors {
		for k := range floats.Vectors[i] {
			// The shortest text that reads back as the same float32.
			if floats.Vectors[i][k] != b64.Vectors[i][k] {
				t.Fatalf("vector %d[%d]: %v as floats, %v as base64", i, k, floats.Vectors[i][k], b64.Vectors[i][k])
			}
		}
	}
	if floats.Tokens != 24 || b64.Tokens != 24 {
		t.Fatalf("tokens %d, %d", floats.Tokens, b64.Tokens)
	}
}

// BenchmarkEmbedReply reads a reply of 100 vectors of 1,536 floats (what
// text-embedding-3-small returns for a batch of 100), as float text and as
// base64: into values (a caller of another form: parsed), and as text
// checked for a caller of the reply's own form (passed through).
func BenchmarkEmbedReply(b *testing.B) {
	for _, enc := range []string{"float", "base64"} {
		raw := embedReplyOf(100, 1536, enc == "base64")
		wire := llm.WireOpenAIFloats
		if enc == "base64" {
			wire = llm.WireOpenAIBase64
		}
		for _, mode := range []string{"values", "text"} {
			w := llm.WireNone
			if mode == "text" {
				w = wire
			}
			b.Run(enc+"/"+mode, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				before := processCPU(b)
				for b.Loop() {
					out, err := embedReply(raw, w)
					if err != nil || (out.Text != nil) != (w != llm.WireNone) {
						b.Fatal(err, out.Text != nil)
					}
				}
				b.StopTimer()
				// CPU per vector: what a loaded machine does not change.
				b.ReportMetric(float64((processCPU(b)-before).Nanoseconds())/1e3/float64(b.N)/100, "cpu-µs/vector")
			})
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// embedSeeds are embeddings replies on the edges of what the scanner
// decides.
var embedSeeds = []string{
	`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-2e-3,3E+2,0]}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`,
	`{"data":[{"embedding":"AACAPgAAAL8AAIA/","index":0}]}`,
	`{"data":[{"embedding":"AACAPgAAAL8AAIA","index":0}]}`,
	`{"data":[{"embedding":"@@","index":0}]}`,
	`{"data":[{"embedding":null,"index":null},null]}`,
	`{"data":[],"usage":null,"error":null}`,
	`{"data":null}`,
	`{"data":[{"embedding":[]}]}`,
	`{"data":[{"embedding":[1e39]}]}`,
	`{"data":[{"embedding":[1.0000001192092896]}]}`,
	`{"data":[{"embedding":[1,2],"embedding":[3]}]}`,
	`{"Data":[{"Embedding":[1]}]}`,
	`{"data":[{"index":1.0,"embedding":[1]}]}`,
	`{"data":[{"index":"0","embedding":[1]}]}`,
	`{"data":[{"embedding":[true]}]}`,
	`{"data":[{"embedding":{"0":1}}]}`,
	`{"error":{"message":"busy","type":"server_error","code":"rate_limit_exceeded"}}`,
	`{"usage":{"prompt_tokens":7,"PROMPT_TOKENS":8}}`,
	`{"data":[{"embedding":[1]}]} x`,
	` {"data" : [ { "embedding" : [ 1 , 2 ] } ] } `,
	`{"data":[{"embedding":[0.5,-0.25],"index":0},{"embedding":"AACAPgAAAL8=","index":1}]}`,
	`{"data":[{"embedding":[1e999]}]}`,
	`{"data":[{"embedding":[01]}]}`,
	`{"data":[{"embedding":[1.]}]}`,
	`{"data":[{"embedding":[1,]}]}`,
	`{"data":[{"embedding":"AACA\/gAAAL8="}]}`,
	`{"data":[{"embedding":"AACA-gAAAL8="}]}`,
	`{"data":[{"embedding":"AACAfwAAAL8="}]}`,
	`{"data":[{"embedding":[` + "\n  0.5,\n  -0.25\n" + `]}]}`,
}

// FuzzScanEmbedReply checks that the scanner, wherever it answers, fills
// the reply exactly as jsonv1.Unmarshal does.
func FuzzScanEmbedReply(f *testing.F) {
	for _, name := range []string{"embed.json", "embed_base64.json", "embed_no_usage.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range embedSeeds {
		f.Add([]byte(s))
	}
	f.Add(embedReplyOf(2, 8, false))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanEmbedReply(t, data)
	})
}

// checkScanEmbedReply checks the scan of data for a caller of each form:
// wherever the scanner answers, jsonv1.Unmarshal must fill the reply
// alike, the text kept standing for the values it decodes to.
func checkScanEmbedReply(t *testing.T, data []byte) {
	for _, wire := range []llm.EmbedWire{llm.WireNone, llm.WireOpenAIFloats, llm.WireOpenAIBase64} {
		var sc protocol.Scanner
		var got oaEmbedResponse
		if !scanEmbedReply(&sc, data, &got, wire) {
			continue
		}
		var want oaEmbedResponse
		if err := jsonv1.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q (wire %d): scanned, but jsonv1.Unmarshal fails: %v", data, wire, err)
		}
		for i := range got.Data {
			d := &got.Data[i]
			if d.text == nil {
				continue
			}
			v, err := llm.DecodeEmbedText(wire, d.text)
			if err != nil || len(v) != d.count {
				t.Fatalf("%q (wire %d): text %q of %d values decodes to %d: %v", data, wire, d.text, d.count, len(v), err)
			}
			d.Embedding, d.text, d.count = v, nil, 0
		}
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Fatalf("%q (wire %d):\nscanned   %s\nunmarshal %s", data, wire, gb, wb)
		}
	}
}

// TestScanEmbedReply runs the seeds, and checks that the scanner takes the
// replies OpenAI and the compatible servers send.
func TestScanEmbedReply(t *testing.T) {
	for _, s := range embedSeeds {
		checkScanEmbedReply(t, []byte(s))
	}
	usual := [][]byte{embedReplyOf(3, 16, false), embedReplyOf(3, 16, true), []byte(embedSeeds[0]), []byte(embedSeeds[1])}
	for _, name := range []string{"embed.json", "embed_base64.json", "embed_no_usage.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		usual = append(usual, b)
	}
	for _, s := range usual {
		checkScanEmbedReply(t, s)
		var sc protocol.Scanner
		if !scanEmbedReply(&sc, s, &oaEmbedResponse{}, llm.WireNone) {
			t.Errorf("%.200s: not scanned", s)
		}
	}
}
