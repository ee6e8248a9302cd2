package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// readAll reads every event of input.
func readAll(input string, maxEvent int) ([]SSEEvent, error) {
	rd := NewSSEReader(strings.NewReader(input), maxEvent)
	var out []SSEEvent
	for {
		ev, err := rd.Next()
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
	ev := func(typ, data, bare string) SSEEvent {
		e := SSEEvent{Type: typ}
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
		want        []SSEEvent
	}{
		{"data events", "data: a\n\ndata: b\n\n", []SSEEvent{ev("", "a", ""), ev("", "b", "")}},
		{"named event, CRLF", "event: ping\r\ndata: {}\r\n\r\n", []SSEEvent{ev("ping", "{}", "")}},
		{"multi-line data", "data: a\ndata:b\n\n", []SSEEvent{ev("", "a\nb", "")}},
		{"comments and ids are skipped", ": keepalive\n\nid: 7\nretry: 10\ndata: x\n\n", []SSEEvent{ev("", "x", "")}},
		{"no blank line before EOF", "data: [DONE]", []SSEEvent{ev("", "[DONE]", "")}},
		{"bare JSON error line", "data: a\n\n{\"error\":{\"code\":503}}\n", []SSEEvent{ev("", "a", ""), ev("", "", "{\"error\":{\"code\":503}}\n")}},
		{"pretty-printed bare JSON", "{\n  \"error\": {\n    \"code\": 429\n  }\n}\n", []SSEEvent{ev("", "", "{\n  \"error\": {\n    \"code\": 429\n  }\n}\n")}},
		{"bare JSON right after data", "data: a\n{\"error\":{}}\n", []SSEEvent{ev("", "a", ""), ev("", "", "{\"error\":{}}\n")}},
		{"BOM", "\xEF\xBB\xBFdata: a\n\n", []SSEEvent{ev("", "a", "")}},
		{"event name without data is dropped", "event: x\n\ndata: y\n\n", []SSEEvent{ev("", "y", "")}},
		{"empty data line", "data:\n\n", []SSEEvent{{Data: []byte{}}}},
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

// FuzzSSEReader checks that the SSE reader is stable on arbitrary bytes:
// the events it read, written back as SSE, read the same. It is seeded
// with every protocol's recorded streams.
func FuzzSSEReader(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "*", "testdata", "*.sse"))
	if len(files) == 0 {
		f.Fatal("no recorded streams in upstream/*/testdata")
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1000000000,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
	f.Add([]byte("[{\"error\":{\"code\":429}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := readAll(string(data), MaxEventSize)
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
		second, err := readAll(buf.String(), MaxEventSize)
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

// sizedReads hands out its input in reads of the given sizes, in turn
// (cycling), each capped by the caller's buffer, and records how large a
// buffer each read was given.
type sizedReads struct {
	b      []byte
	sizes  []int
	i      int
	offers []int
}

func (r *sizedReads) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	r.offers = append(r.offers, len(p))
	k := min(len(p), r.sizes[r.i%len(r.sizes)], len(r.b))
	r.i++
	copy(p, r.b[:k])
	r.b = r.b[k:]
	return k, nil
}

// TestSSEReader_BurstBuffer checks the reader's two buffers: a fill that
// brings sseBufferSize sends the next read to a pooled burst buffer,
// which is kept until two reads in a row bring less than half of
// sseBufferSize and given back at the read after them and at Release; and
// whichever buffer a read went to, the events are those of reading the
// input a byte at a time.
func TestSSEReader_BurstBuffer(t *testing.T) {
	is := is.New(t)
	var in strings.Builder
	files, _ := filepath.Glob(filepath.Join("..", "..", "*", "testdata", "*.sse"))
	is.True(len(files) > 0)
	for _, file := range files {
		b, err := os.ReadFile(file)
		is.NoErr(err)
		in.Write(b)
		in.WriteString("\n\n")
	}
	in.WriteString("data: " + strings.Repeat("long ", 3000) + "\r\n\r\n") // longer than the burst buffer
	in.WriteString("{\"error\":{\"message\":\"bare\"}}\n\ndata: [DONE]\n\n")
	input := in.String()

	want := readWith(t, &chunked{b: []byte(input), n: 1})
	bursts := 0
	for _, sizes := range [][]int{
		{sseBufferSize},
		{sseBufferSize, 700, 3000, 100},
		{5000, 2, 900, sseBufferSize, sseBufferSize / 2, sseBufferSize/2 - 1},
		{sseBurstSize + 1},
		{1, 2, 3, sseBufferSize - 1},
		{sseBufferSize, 100, 600, 100, 100, 100, 2000, 100},
		{1, sseBufferSize, 100, 600, 100, 100, 100, 2000, 100},
	} {
		r := &sizedReads{b: []byte(input), sizes: sizes}
		got := readWith(t, r)
		is.Equal(len(got), len(want))
		for i := range got {
			if got[i].Type != want[i].Type || !bytes.Equal(got[i].Data, want[i].Data) || !bytes.Equal(got[i].Bare, want[i].Bare) {
				t.Fatalf("reads %v: event %d: %+v, want %+v", sizes, i, got[i], want[i])
			}
		}
		// What each read was offered, from what the fill before it
		// brought: outside a burst, a fill waits in a read of one byte
		// and, unless that byte is a line end, reads the rest into a
		// small buffer; in one, a single read into the burst buffer.
		var more, burst bool
		short, at := 0, 0 // at: the input read so far
		for k := 0; k < len(r.offers); {
			read := func(want int) int {
				if r.offers[k] != want {
					t.Fatalf("reads %v: read %d was offered %d bytes, want %d", sizes, k, r.offers[k], want)
				}
				n := min(want, sizes[k%len(sizes)], len(input)-at)
				k++
				at += n
				return n
			}
			var n int
			if more {
				burst = true
				n = read(sseBurstSize)
			} else if c := input[at]; c == '\n' || c == '\r' {
				n = read(1)
			} else if n = read(1); k < len(r.offers) {
				n += read(sseBufferSize - 1)
			}
			switch {
			case n == sseBufferSize || more && n >= sseBufferSize/2:
				more, short = true, 0
			case more && short == 0:
				short = 1
			default:
				more, short = false, 0
			}
		}
		if burst {
			bursts++
		}
	}

	is.Equal(bursts, 6) // the cases that read into the burst buffer

	// The burst buffer goes back after two small reads, and at Release.
	rd := NewSSEReader(&sizedReads{b: []byte(input), sizes: []int{sseBufferSize, sseBufferSize, 10, 10, 10}}, MaxEventSize)
	for rd.r.burst == nil {
		_, err := rd.Next()
		is.NoErr(err)
	}
	for rd.r.burst != nil {
		_, err := rd.Next()
		is.NoErr(err)
	}
	for rd.r.burst == nil {
		_, err := rd.Next()
		is.NoErr(err)
	}
	rd.Release()
	is.True(rd.r.burst == nil)
}

// readWith reads every event from r.
func readWith(t *testing.T, r io.Reader) []SSEEvent {
	t.Helper()
	rd := NewSSEReader(r, MaxEventSize)
	defer rd.Release()
	var out []SSEEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		ev.Data, ev.Bare = bytes.Clone(ev.Data), bytes.Clone(ev.Bare)
		out = append(out, ev)
	}
}

// eventAtATime hands out one event per wait, as an upstream that writes
// an event at a time and pauses between them: a read finding nothing left
// of the last event is the wait, and records whether the reader held a
// buffer through it.
type eventAtATime struct {
	events []string
	cur    string
	rd     *SSEReader
	waits  int
	held   int // waits through which the reader held a buffer
	wide   int // waits offered more than one byte
}

func (e *eventAtATime) Read(p []byte) (int, error) {
	if e.cur == "" {
		if len(e.events) == 0 {
			return 0, io.EOF
		}
		e.waits++
		if len(p) != 1 {
			e.wide++
		}
		if in := &e.rd.r; in.small != nil || in.burst != nil || in.buf != nil {
			e.held++
		}
		e.cur, e.events = e.events[0], e.events[1:]
	}
	n := copy(p, e.cur)
	e.cur = e.cur[n:]
	return n, nil
}

// TestSSEReader_WaitsWithoutBuffer checks that a stream waiting for its
// upstream's next event holds no read buffer, and waits in a read of one
// byte: 1,000 open streams of a slow upstream hold no 1 KiB each.
func TestSSEReader_WaitsWithoutBuffer(t *testing.T) {
	is := is.New(t)
	in := &eventAtATime{}
	for i := range 50 {
		in.events = append(in.events, fmt.Sprintf("data: {\"n\":%d,\"text\":%q}\n\n", i, strings.Repeat("x", i*15)))
	}
	rd := NewSSEReader(in, MaxEventSize)
	in.rd = rd
	for i := range 50 {
		ev, err := rd.Next()
		is.NoErr(err)
		is.Equal(string(ev.Data), fmt.Sprintf("{\"n\":%d,\"text\":%q}", i, strings.Repeat("x", i*15)))
	}
	_, err := rd.Next()
	is.Equal(err, io.EOF)
	rd.Release()
	is.True(rd.r.small == nil && rd.r.burst == nil)
	is.Equal(in.waits, 50)
	is.Equal(in.held, 0) // no wait held a buffer
	is.Equal(in.wide, 0) // each waited in a read of one byte
}

// writesOf hands out its pieces in order, each across as many reads as
// the caller's buffer needs, never more than one piece a read; past the
// last it counts the reads that would have waited for the upstream.
type writesOf struct {
	pieces []string
	waited int
}

func (s *writesOf) Read(p []byte) (int, error) {
	if len(s.pieces) == 0 {
		s.waited++
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.pieces[0])
	if s.pieces[0] = s.pieces[0][n:]; s.pieces[0] == "" {
		s.pieces = s.pieces[1:]
	}
	return n, nil
}

// TestSSEReader_LineEndNotHeld checks that an event whose blank line
// comes in a write of its own (a server writing an event's lines one at a
// time) is returned when that line end comes, without a read that would
// wait for the upstream's next write.
func TestSSEReader_LineEndNotHeld(t *testing.T) {
	for _, pieces := range [][]string{
		{"data: a\n", "\n"},
		{"data: a\r\n", "\r\n"},
		{"data: a\r", "\r"},
		{"data: a", "\n", "\n"},
		{"data: a\n", "\n", "data: b\n", "\n"},
	} {
		in := &writesOf{pieces: slices.Clone(pieces)}
		rd := NewSSEReader(in, MaxEventSize)
		ev, err := rd.Next()
		if err != nil || string(ev.Data) != "a" || in.waited != 0 {
			t.Fatalf("%q: event %q, %v, after %d reads that would wait; want \"a\" at once", pieces, ev.Data, err, in.waited)
		}
		rd.Release()
	}
}
