package protocoltest

import (
	"bytes"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	sse "github.com/tmaxmax/go-sse"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// FuzzDecoder feeds arbitrary bytes to the stream reader through the
// decoders newDecoder makes, seeded with the recorded streams beside the
// test (testdata/*.sse) and seeds. It must never panic, and a stream that
// succeeds has the shape every stream has (see CheckStream).
func FuzzDecoder(f *testing.F, newDecoder func() protocol.Decoder, seeds ...string) {
	seedStreams(f)
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader(data)), newDecoder())
		if err == nil {
			CheckStream(t, s)
		}
	})
}

// StreamText decodes sse through dec and returns its text deltas, each
// followed by "|", failing t on an error.
func StreamText(t *testing.T, dec protocol.Decoder, sse string) string {
	t.Helper()
	s, err := protocol.DecodeStream(io.NopCloser(strings.NewReader(sse)), dec)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer s.Close()
	var text strings.Builder
	for s.Next() {
		if ev := s.Event(); ev.Type == llm.EventTextDelta {
			text.WriteString(ev.Text + "|")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return text.String()
}

// seedStreams adds every recorded stream, testdata/*.sse beside the test,
// to a fuzz target's corpus.
func seedStreams(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recorded streams in testdata: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// CheckStream reads s to its end and fails t unless it has the shape every
// stream has: tool-call fragments follow their start, a finish event comes
// last and carries usage, and a stream that ends without an error ends with
// one.
func CheckStream(t *testing.T, s upstream.Stream) {
	t.Helper()
	defer s.Close()
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

// BenchmarkChunk measures reading and decoding one typical stream frame
// through dec, after the events of prime (which sets dec up for frame),
// with svcgw's SSE reader and, for comparison (docs/sse.md), with go-sse's
// sse.Read pulled through iter.Pull as a pulled Stream would need it: its
// data handed to the decoder without a copy (unsafe, its best case) and
// copied as plain code would.
func BenchmarkChunk(b *testing.B, dec protocol.Decoder, prime, frame string) {
	out := make([]llm.Event, 0, 8)
	if prime != "" {
		ev, _ := protocol.NewSSEReader(strings.NewReader(prime), protocol.MaxEventSize).Next()
		out, _, _ = dec.Decode(ev, out)
	}
	decode := func(b *testing.B, ev protocol.SSEEvent) {
		var err error
		out, _, err = dec.Decode(ev, out[:0])
		if err != nil || len(out) != 1 {
			b.Fatalf("decode: %v, %d events", err, len(out))
		}
	}
	b.Run("reader=svcgw", func(b *testing.B) {
		rd := protocol.NewSSEReader(&cycle{frame: []byte(frame)}, protocol.MaxEventSize)
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			ev, err := rd.Next()
			if err != nil {
				b.Fatal(err)
			}
			decode(b, ev)
		}
	})
	for _, copied := range []bool{false, true} {
		name := "reader=go-sse"
		if copied {
			name += "-copy"
		}
		b.Run(name, func(b *testing.B) {
			next, stop := iter.Pull2(sse.Read(&cycle{frame: []byte(frame)}, &sse.ReadConfig{MaxEventSize: protocol.MaxEventSize}))
			defer stop()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				e, err, ok := next()
				if !ok || err != nil {
					b.Fatal(err)
				}
				ev := protocol.SSEEvent{Type: e.Type, Data: unsafe.Slice(unsafe.StringData(e.Data), len(e.Data))}
				if copied {
					ev.Data = []byte(e.Data)
				}
				decode(b, ev)
			}
		})
	}
}

// RecordedFrames returns the data of every event of the recorded streams
// in dir (*.sse), to seed a fuzz target of a vendor's frame scanner.
func RecordedFrames(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sse"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no recorded streams in %s: %v", dir, err)
	}
	var frames [][]byte
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		rd := protocol.NewSSEReader(bytes.NewReader(raw), protocol.MaxEventSize)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			data := ev.Data
			if data == nil {
				data = ev.Bare
			}
			frames = append(frames, bytes.Clone(data))
		}
	}
	return frames
}
