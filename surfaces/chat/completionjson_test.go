package chat

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/svcgw/svcgw/internal/testfill"
)

// fuzzCompletion builds a completion from fuzzed values: flags pick which
// optional members are set and the shapes of its lists.
func fuzzCompletion(text, other string, flags uint64, n int, created int64) *completion {
	bit := func(i uint) bool { return flags&(1<<i) != 0 }
	c := &completion{ID: other, Object: "chat.completion", Created: created, Model: text}
	if !bit(0) {
		c.Choices = []completionChoice{}
	}
	for i := range 1 + int(flags>>30&1) {
		if bit(1) && i == 0 {
			break
		}
		var ch completionChoice
		ch.Index, ch.FinishReason = i*n, other
		m := &ch.Message
		m.Role = text
		if bit(2) {
			m.Content = &text
		}
		if bit(3) {
			m.Reasoning = &other
		}
		if bit(4) {
			m.Refusal = &text
		}
		if bit(5) {
			m.Annotations = []struct{}{}
		}
		if bit(6) {
			m.Annotations = make([]struct{}, 2)
		}
		if bit(7) {
			ch.Logprobs = &struct{}{}
		}
		if bit(8) {
			m.ToolCalls = []toolCallJSON{}
		}
		for j := range 3 {
			if !bit(9 + uint(j)) {
				continue
			}
			tc := toolCallJSON{}
			if bit(12) {
				tc.Index = &n
			}
			if bit(13) {
				tc.ID = text
			}
			if bit(14) {
				tc.Type = "function"
			}
			if bit(15) {
				tc.Function.Name = other
			}
			if bit(16 + uint(j)) {
				args := text + other
				tc.Function.Arguments = &args
			}
			m.ToolCalls = append(m.ToolCalls, tc)
		}
		c.Choices = append(c.Choices, ch)
	}
	if bit(20) {
		c.Usage = &usageJSON{PromptTokens: n, CompletionTokens: -n, TotalTokens: int(created)}
		c.Usage.PromptTokensDetails.CachedTokens = n / 2
		c.Usage.PromptTokensDetails.CacheWriteTokens = n / 3
		c.Usage.CompletionTokensDetails.ReasoningTokens = n / 5
	}
	return c
}

func checkCompletionJSON(t *testing.T, c *completion) {
	t.Helper()
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	w := bytes.TrimSuffix(want.Bytes(), []byte("\n"))
	if got := c.AppendJSON([]byte("x")); got[0] != 'x' || !bytes.Equal(got[1:], w) {
		t.Fatalf("AppendJSON wrote\n%s\nencoding/json\n%s", got[1:], w)
	}
}

var completionStrings = []string{"", "chatcmpl-1", "<b>&amp;</b>", "quote \" back \\ slash", "\b\f\n\r\t\x00\x1f\x7f",
	"caf\xe9", "\u2028\u2029", "é 中文 😀"}

// TestCompletionJSON checks AppendJSON against encoding/json with every
// optional member and list shape, alone and all together, and awkward
// texts and numbers.
func TestCompletionJSON(t *testing.T) {
	for i := range 32 {
		for _, s := range completionStrings {
			for _, n := range []int{0, 1, -7, math.MaxInt64, math.MinInt64} {
				checkCompletionJSON(t, fuzzCompletion(s, "other "+s, 1<<i, n, int64(n)))
				checkCompletionJSON(t, fuzzCompletion(s, s, 1<<i|0x1ffffc, n, 1767225600))
				checkCompletionJSON(t, fuzzCompletion(s, s, 1<<i^(1<<31-1), n, -1))
			}
		}
	}
}

// TestCompletionJSON_EveryField checks AppendJSON against encoding/json
// with every field of a completion, and of what it holds, set: a field
// added to the types and not written by AppendJSON fails here.
func TestCompletionJSON_EveryField(t *testing.T) {
	var c completion
	testfill.FillNonZero(reflect.ValueOf(&c).Elem())
	checkCompletionJSON(t, &c)
}

// FuzzCompletionJSON checks AppendJSON against encoding/json.
func FuzzCompletionJSON(f *testing.F) {
	for i, s := range completionStrings {
		f.Add(s, "other", uint64(1)<<(i*3%31)|0x100024, i, int64(i))
	}
	f.Fuzz(func(t *testing.T, text, other string, flags uint64, n int, created int64) {
		checkCompletionJSON(t, fuzzCompletion(text, other, flags, n, created))
	})
}
