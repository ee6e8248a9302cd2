package gencontent

import (
	"errors"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/llm"
)

func TestCodec_DecodeEmbed_inputTokens(t *testing.T) {
	// A text svcgw counts as just above the bound, and one far beyond
	// Gemini's 2,048 tokens but within it.
	over := strings.Repeat("word ", MaxEmbedInputTokens+1)
	if llm.TextTokens(over) <= MaxEmbedInputTokens {
		t.Fatalf("the long text is %d tokens", llm.TextTokens(over))
	}
	within := strings.Repeat("word ", 5000)
	if n := llm.TextTokens(within); n <= 2048 || n > MaxEmbedInputTokens {
		t.Fatalf("the text within is %d tokens", n)
	}
	part := func(s string) string { return `{"content":{"parts":[{"text":"` + s + `"}]}}` }
	for _, tc := range []struct{ name, method, body, param string }{
		{"embedContent", "embedContent", part(over), "content"},
		{"the first of a batch", "batchEmbedContents", `{"requests":[` + part(over) + `]}`, "requests[0].content"},
		{"the third of a batch", "batchEmbedContents", `{"requests":[` + part("a") + `,` + part(within) + `,` + part(over) + `]}`, "requests[2].content"},
		// Parts are joined into one input, counted as one.
		{"two parts over together", "embedContent", `{"content":{"parts":[{"text":"` + within + `"},{"text":"` + within + `"}]}}`, "content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Codec{}.DecodeEmbed(embedCall("m:"+tc.method), []byte(tc.body))
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *llm.Error", err)
			}
			want := "* " + tc.param + ": the text is "
			if e.Kind != llm.KindInvalidRequest || e.Param != tc.param || !strings.HasPrefix(e.Message, want) ||
				!strings.Contains(e.Message, "an embedding input takes at most 8192 tokens") {
				t.Errorf("got %s %q %q, want invalid_request %q starting %q", e.Kind, e.Param, e.Message, tc.param, want)
			}
		})
	}
	t.Run("a token a byte at most: a text as long in bytes as the bound is within it", func(t *testing.T) {
		// The densest texts TextTokens counts: punctuation between
		// letters, newlines, bytes that are not UTF-8.
		for _, unit := range []string{"a!", "\n", "\xff", "😀", "中"} {
			s := strings.Repeat(unit, MaxEmbedInputTokens/len(unit))
			if n := llm.TextTokens(s); n > len(s) {
				t.Errorf("%q × %d: %d tokens in %d bytes", unit, MaxEmbedInputTokens/len(unit), n, len(s))
			}
		}
	})
	t.Run("beyond Gemini's 2,048 tokens, within the bound: taken whole", func(t *testing.T) {
		req, _, err := Codec{}.DecodeEmbed(embedCall("m:batchEmbedContents"), []byte(`{"requests":[`+part(within)+`,`+part("a")+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		if req.Inputs[0].Text != within {
			t.Errorf("the input was changed: %d bytes, sent %d", len(req.Inputs[0].Text), len(within))
		}
	})
}
