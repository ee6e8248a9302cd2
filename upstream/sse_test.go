package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/llm"
)

// readAll reads every event of input.
func readAll(input string, maxEvent int) ([]sseEvent, error) {
	rd := newSSEReader(strings.NewReader(input), maxEvent)
	var out []sseEvent
	for {
		ev, err := rd.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		// Data and Bare are only valid until the next call.
		ev.Data, ev.Bare = bytes.Clone(ev.Data), bytes.Clone(ev.Bare)
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	ev := func(typ, data, bare string) sseEvent {
		e := sseEvent{Type: typ}
		if data != "" {
			e.Data = []byte(data)
		}
		if bare != "" {
			e.Bare = []byte(bare)
		}
		return e
	}
	cases := []struct {
		name, input string
		want        []sseEvent
	}{
		{"data events", "data: a\n\ndata: b\n\n", []sseEvent{ev("", "a", ""), ev("", "b", "")}},
		{"named event, CRLF", "event: ping\r\ndata: {}\r\n\r\n", []sseEvent{ev("ping", "{}", "")}},
		{"multi-line data", "data: a\ndata:b\n\n", []sseEvent{ev("", "a\nb", "")}},
		{"comments and ids are skipped", ": keepalive\n\nid: 7\nretry: 10\ndata: x\n\n", []sseEvent{ev("", "x", "")}},
		{"no blank line before EOF", "data: [DONE]", []sseEvent{ev("", "[DONE]", "")}},
		{"bare JSON error line", "data: a\n\n{\"error\":{\"code\":503}}\n", []sseEvent{ev("", "a", ""), ev("", "", "{\"error\":{\"code\":503}}\n")}},
		{"pretty-printed bare JSON", "{\n  \"error\": {\n    \"code\": 429\n  }\n}\n", []sseEvent{ev("", "", "{\n  \"error\": {\n    \"code\": 429\n  }\n}\n")}},
		{"bare JSON right after data", "data: a\n{\"error\":{}}\n", []sseEvent{ev("", "a", ""), ev("", "", "{\"error\":{}}\n")}},
		{"BOM", "\xEF\xBB\xBFdata: a\n\n", []sseEvent{ev("", "a", "")}},
		{"event name without data is dropped", "event: x\n\ndata: y\n\n", []sseEvent{ev("", "y", "")}},
		{"empty data line", "data:\n\n", []sseEvent{{Data: []byte{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			got, err := readAll(c.input, 1<<10)
			is.NoErr(err) // read
			is.Equal(len(got), len(c.want))
			for i := range got {
				is.Equal(got[i].Type, c.want[i].Type)
				is.Equal(string(got[i].Data), string(c.want[i].Data))
				is.Equal(string(got[i].Bare), string(c.want[i].Bare))
			}
		})
	}

	t.Run("event over the maximum", func(t *testing.T) {
		is := is.New(t)
		_, err := readAll("data: "+strings.Repeat("x", 100)+"\n\n", 64)
		is.True(errors.Is(err, errEventTooLarge))
		_, err = readAll("data: "+strings.Repeat("x", 40<<10)+"\n\n", 32<<10) // a line longer than the read buffer
		is.True(errors.Is(err, errEventTooLarge))
		got, err := readAll("data: "+strings.Repeat("x", 40<<10)+"\n\n", 64<<10)
		is.NoErr(err) // a long line within the maximum
		is.Equal(len(got[0].Data), 40<<10)
	})
}

func TestAnthropicUsage(t *testing.T) {
	is := is.New(t)
	n := func(v int) *int { return &v }
	// A stream: message_start reports input and cache counts, message_delta
	// the cumulative ones (newer API) or only output (older API).
	var u anUsage
	u.merge(&anUsage{InputTokens: n(10), CacheReadInputTokens: n(100), CacheCreationInputTokens: n(50), OutputTokens: n(1)})
	u.merge(&anUsage{OutputTokens: n(20)})
	is.Equal(u.canonical(), llm.Usage{InputTokens: 160, CachedInputTokens: 100, CacheCreationTokens: 50, OutputTokens: 20})
	u.merge(&anUsage{InputTokens: n(10), CacheReadInputTokens: n(100), CacheCreationInputTokens: n(50), OutputTokens: n(30)})
	is.Equal(u.canonical().InputTokens, 160) // reported twice, counted once
	// Only the split: the flat count is its sum.
	split := anUsage{InputTokens: n(5)}
	split.CacheCreation = &struct {
		Ephemeral5m *int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int `json:"ephemeral_1h_input_tokens"`
	}{n(7), n(11)}
	is.Equal(split.canonical(), llm.Usage{InputTokens: 23, CacheCreationTokens: 18, CacheCreation1hTokens: 11})
}

// testCall is a call for decoding a stream without HTTP.
func testCall() *call {
	c := &call{parent: context.Background()}
	c.ctx, c.cancel = context.WithCancelCause(c.parent)
	return c
}

func decoderFor(v byte) streamDecoder {
	switch v % 3 {
	case 0:
		return &openAIStream{}
	case 1:
		return &anthropicStream{blocks: map[int]*anBlockState{}}
	}
	return &geminiStream{}
}

// FuzzStream feeds arbitrary bytes to the upstream stream reader through
// each vendor's decoder. It must never panic; a stream that succeeds ends
// with exactly one finish event, and its tool-call fragments follow their
// start. Then the SSE reader must be stable: the events it read, written
// back as SSE, read the same.
func FuzzStream(f *testing.F) {
	for i, dir := range []string{"openai", "anthropic", "gemini"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.sse"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(byte(i), b)
		}
	}
	f.Add(byte(0), []byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1000000000,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add(byte(1), []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
	f.Add(byte(2), []byte("[{\"error\":{\"code\":429}}]\n"))
	f.Fuzz(func(t *testing.T, v byte, data []byte) {
		s, err := startStream(testCall(), io.NopCloser(bytes.NewReader(data)), decoderFor(v))
		if err == nil {
			var evs []llm.Event
			for s.Next() {
				evs = append(evs, s.Event())
			}
			started := map[int]bool{}
			for i, ev := range evs {
				switch ev.Type {
				case llm.EventToolCallStart:
					if ev.ToolCall == nil {
						t.Fatalf("tool call start without a call")
					}
					started[ev.Index] = true
				case llm.EventToolCallDelta:
					if !started[ev.Index] {
						t.Fatalf("fragment of tool call %d before its start", ev.Index)
					}
				case llm.EventFinish:
					if i != len(evs)-1 || ev.Usage == nil {
						t.Fatalf("finish event %d of %d, usage %v", i, len(evs), ev.Usage)
					}
				}
			}
			if s.Err() == nil && (len(evs) == 0 || evs[len(evs)-1].Type != llm.EventFinish) {
				t.Fatalf("stream ended cleanly without a finish event")
			}
			s.Close()
		}

		first, err := readAll(string(data), maxEventSize)
		if err != nil || bytes.ContainsRune(data, '\r') {
			return
		}
		var buf strings.Builder
		for _, ev := range first {
			if ev.Type != "" {
				buf.WriteString("event: " + ev.Type + "\n")
			}
			if ev.Data != nil {
				for _, line := range strings.Split(string(ev.Data), "\n") {
					buf.WriteString("data: " + line + "\n")
				}
			}
			buf.Write(ev.Bare)
			buf.WriteString("\n")
		}
		second, err := readAll(buf.String(), maxEventSize)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if len(first) != len(second) {
			t.Fatalf("read %d events, then %d:\n%q", len(first), len(second), buf.String())
		}
		for i := range first {
			a, b := first[i], second[i]
			if a.Type != b.Type || !bytes.Equal(a.Data, b.Data) || (a.Data == nil) != (b.Data == nil) || !bytes.Equal(a.Bare, b.Bare) {
				t.Fatalf("event %d: %+v, then %+v", i, a, b)
			}
		}
	})
}

// cycle is an endless reader repeating one frame.
type cycle struct {
	frame []byte
	off   int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.frame[c.off:])
		n += k
		c.off = (c.off + k) % len(c.frame)
	}
	return n, nil
}

// benchChunk measures reading and decoding one typical stream frame.
func benchChunk(b *testing.B, dec streamDecoder, prime, frame string) {
	out := make([]llm.Event, 0, 8)
	if prime != "" {
		ev, _ := newSSEReader(strings.NewReader(prime), maxEventSize).next()
		out, _, _ = dec.decode(ev, out)
	}
	rd := newSSEReader(&cycle{frame: []byte(frame)}, maxEventSize)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ev, err := rd.next()
		if err != nil {
			b.Fatal(err)
		}
		out, _, err = dec.decode(ev, out[:0])
		if err != nil || len(out) != 1 {
			b.Fatalf("decode: %v, %d events", err, len(out))
		}
	}
}

func BenchmarkStreamChunk(b *testing.B) {
	b.Run("openai", func(b *testing.B) {
		benchChunk(b, &openAIStream{}, "",
			`data: {"id":"chatcmpl-gw1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-mini","system_fingerprint":"fp_gw01","choices":[{"index":0,"delta":{"content":"Checking the "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n")
	})
	b.Run("anthropic", func(b *testing.B) {
		benchChunk(b, &anthropicStream{blocks: map[int]*anBlockState{}},
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking the \"}}\n\n")
	})
	b.Run("gemini", func(b *testing.B) {
		benchChunk(b, &geminiStream{}, "",
			`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Checking the "}]},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-2.5-flash","responseId":"gw-7Hq2aXmK"}`+"\n\n")
	})
}
