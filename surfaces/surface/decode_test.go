package surface_test

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/chat"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/surfaces/messages"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// largeCase is one surface's request carrying the same conversation: a
// system prompt, a long question and a 4 MiB PNG (5.6 MB of base64), the
// body a vision call from any of the SDKs sends.
type largeCase struct {
	name  string
	codec surface.Codec
	path  string // with the generate-content method, for its {rest...}
	body  []byte
}

const (
	largeSystem   = "You are a careful assistant."
	largeImageLen = 4 << 20
)

var largeQuestion = strings.Repeat("Describe what you see in this picture, please. ", 40)

func largeCases(tb testing.TB) ([]largeCase, []byte) {
	tb.Helper()
	img := make([]byte, largeImageLen)
	rng := rand.NewChaCha8([32]byte{18})
	_, _ = rng.Read(img)
	data := base64.StdEncoding.EncodeToString(img)
	return []largeCase{
		{"chat", chat.Codec{}, "/v1/chat/completions", []byte(`{"model":"svc-fusion","max_tokens":1024,"messages":[` +
			`{"role":"system","content":"` + largeSystem + `"},` +
			`{"role":"user","content":[{"type":"text","text":"` + largeQuestion + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + data + `"}}]}]}`)},
		{"responses", chat.ResponsesCodec{}, "/v1/responses", []byte(`{"model":"svc-fusion","max_output_tokens":1024,"instructions":"` + largeSystem + `",` +
			`"input":[{"role":"user","content":[{"type":"input_text","text":"` + largeQuestion + `"},{"type":"input_image","image_url":"data:image/png;base64,` + data + `"}]}]}`)},
		{"messages", messages.Codec{}, "/v1/messages", []byte(`{"model":"svc-fusion","max_tokens":1024,"system":"` + largeSystem + `",` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"` + largeQuestion + `"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + data + `"}}]}]}`)},
		{"gencontent", gencontent.Codec{}, "svc-fusion:generateContent", []byte(`{"systemInstruction":{"parts":[{"text":"` + largeSystem + `"}]},` +
			`"contents":[{"role":"user","parts":[{"text":"` + largeQuestion + `"},{"inlineData":{"mimeType":"image/png","data":"` + data + `"}}]}],` +
			`"generationConfig":{"maxOutputTokens":1024}}`)},
	}, img
}

func (c largeCase) request() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.SetPathValue("rest", c.path)
	return r
}

// TestDecodeRequest_LargeBodiesAreTheSameCall checks that the benchmark's
// bodies are one call in four formats: each decodes to the same system
// prompt, question and image.
func TestDecodeRequest_LargeBodiesAreTheSameCall(t *testing.T) {
	cases, img := largeCases(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := c.codec.DecodeRequest(c.request(), c.body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(req.System) != 1 || req.System[0].Text != largeSystem {
				t.Errorf("system = %+v", req.System)
			}
			if req.MaxTokens != 1024 {
				t.Errorf("max tokens = %d", req.MaxTokens)
			}
			if len(req.Messages) != 1 || req.Messages[0].Role != llm.RoleUser || len(req.Messages[0].Parts) != 2 {
				t.Fatalf("messages = %d, want one user message of two parts", len(req.Messages))
			}
			text, image := req.Messages[0].Parts[0], req.Messages[0].Parts[1]
			if text.Type != llm.PartText || text.Text != largeQuestion {
				t.Errorf("first part is not the question")
			}
			if image.Type != llm.PartImage || image.MediaType != "image/png" || !bytes.Equal(image.Data, img) {
				t.Errorf("second part is not the image (type %s, media type %s, %d bytes)", image.Type, image.MediaType, len(image.Data))
			}
		})
	}
}

// BenchmarkDecodeRequest_Large decodes the same vision call on every
// surface; each surface's decode should be within 1.5× of the fastest's.
func BenchmarkDecodeRequest_Large(b *testing.B) {
	cases, _ := largeCases(b)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := c.request()
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.codec.DecodeRequest(r, c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
