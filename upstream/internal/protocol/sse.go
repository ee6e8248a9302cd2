package protocol

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Reading upstream SSE.
//
// svcgw reads upstream SSE with this small reader rather than go-sse's
// sse.Read, for three reasons (docs/sse.md has the measurements):
//
//   - sse.Read drops every line that is not an SSE field, as the SSE spec
//     says, but Gemini may report a mid-stream error as a bare JSON object
//     without a data: prefix (docs/wire/generate-content.md#errors-mid-stream), and an
//     OpenAI-compatible server may answer a stream request with a plain
//     JSON error body and status 200. Dropped, those would look like a
//     stream cut short, losing the error's kind (429 vs 503) and its
//     retry guidance.
//   - sse.Read is a push iterator, while Stream is pulled like sql.Rows;
//     bridging them needs iter.Pull, a coroutine per stream.
//   - It hands out each event's data in a reused buffer, so decoding a
//     frame allocates only what the JSON decoder does.
//
// Like go-sse it has an explicit maximum event size; unlike the SSE spec
// (and go-sse since v0.12) it dispatches an event still pending at EOF
// (docs/sse.md#the-reader). Lines end with LF, CRLF or a lone CR,
// as the SSE spec says. A UTF-8 BOM at the start is skipped.

// errEventTooLarge is returned for an event over the reader's maximum.
var errEventTooLarge = errors.New("upstream SSE event too large")

// SSEEvent is one event. Data and Bare are valid until the next call to
// next.
type SSEEvent struct {
	Type string // the event field; "" when absent
	Data []byte // the data lines joined by "\n"
	// Bare holds lines that are not SSE fields: a JSON object or array
	// written without data: (it starts at a line beginning with { or [,
	// which also ends an event in progress, and runs to the next blank
	// line).
	Bare []byte
}

// SSEReader reads the events of one upstream stream (see above).
type SSEReader struct {
	r          sseInput
	max        int
	data, bare []byte
	carry      []byte // a bare line that ended the previous event
	long       []byte // a line longer than the buffered input
	begun      bool
	cr         bool // the last line ended with a CR: skip a LF right after it
}

// sseBufferSize is the read buffer a stream borrows (smallPool) once its
// upstream's next bytes have come. Events are usually a few hundred bytes
// (a chat-completions chunk is ~250); longer lines are gathered in
// SSEReader.long, so a small buffer only costs an extra copy for big
// events. A stream waiting for its upstream holds no buffer: with 1,000
// open streams each used to own one, 1 MiB (the connection under it has
// its own read buffer, which the bytes that end the wait are in).
//
// A stream whose upstream delivers more than that at once reads into a
// pooled sseBurstSize buffer instead while the burst lasts (sseInput.fill):
// each read of the body is an event batch the relay writes to its caller
// in one flush, so reading a burst 1 KiB at a time cost a write(2) to the
// caller per KiB (bench/RESULTS.md, "What only a stream pays").
const (
	sseBufferSize = 1 << 10
	sseBurstSize  = 8 << 10
)

// NewSSEReader returns a reader of r whose events are at most maxEvent
// bytes.
func NewSSEReader(r io.Reader, maxEvent int) *SSEReader {
	return &SSEReader{r: sseInput{rd: r}, max: maxEvent}
}

// Release returns the buffer the reader holds, if any, to its pool; the
// reader must not be used after it.
func (s *SSEReader) Release() { s.r.release() }

// sseInput is the SSE reader's input buffer. It reads only when all it
// holds has been consumed (SSEReader gathers a partial line in long), so
// each read may go to any buffer with nothing to carry over: a small one
// borrowed from a pool once the upstream's next bytes have come, or, while
// the upstream is sending more than that at once, a burst buffer borrowed
// from another. A stream waiting for its upstream between events — the
// usual case, and every stream of a slow one — holds neither: it waits in
// a one-byte read (fill).
type sseInput struct {
	rd    io.Reader
	buf   []byte // buf[r:w] is unread
	r, w  int
	small *[]byte // borrowed from smallPool, from the wait's end until consumed
	burst *[]byte // borrowed from burstPool while the upstream bursts
	// more: the reads so far suggest the upstream has more on its way,
	// so the next read goes to the burst buffer; short counts the reads
	// in a row that brought less than half of sseBufferSize.
	more  bool
	short int
	err   error   // a read error, returned once what came before it is consumed
	first [1]byte // what the wait for the upstream's next bytes reads into
}

var (
	smallPool = sync.Pool{New: func() any { b := make([]byte, sseBufferSize); return &b }}
	burstPool = sync.Pool{New: func() any { b := make([]byte, sseBurstSize); return &b }}
)

func (b *sseInput) buffered() []byte { return b.buf[b.r:b.w] }

func (b *sseInput) discard(n int) { b.r += n }

// fill reads more input into the empty buffer, as bufio.Reader does:
// data first, then the error that came with it; io.ErrNoProgress after
// 100 empty reads.
//
// A read goes to the burst buffer when the ones before it suggest more is
// already on its way: one filled sseBufferSize, and since then fewer than
// two in a row brought less than half that much (a read may stop short at
// the end of an HTTP/1.1 chunk in the middle of a burst). An upstream that
// sends an event or two at a time stays on small buffers, and a burst
// buffer goes back to the pool at the first read after a burst.
//
// Otherwise the stream waits for its upstream in a read of one byte, with
// no buffer borrowed, and borrows a small one for that byte and a second
// read of what came with it: the body's layers below (the connection's
// read buffer, an HTTP/2 stream's) hold the rest of what arrived, so the
// second read returns it at once. It waits only when the upstream's write
// stopped after that byte, and then for bytes the line needs anyway: a
// byte that is not a line end cannot complete a line, so no event waits
// on that read. A line end is returned alone.
func (b *sseInput) fill() error {
	if b.err != nil {
		err := b.err
		b.err = nil
		return err
	}
	if b.more {
		b.putSmall()
		if b.burst == nil {
			b.burst = burstPool.Get().(*[]byte)
		}
		return b.read(*b.burst, 0)
	}
	b.release()
	for range 100 {
		n, err := b.rd.Read(b.first[:])
		if n < 0 || n > 1 {
			panic("upstream SSE: the body's reader returned an invalid count")
		}
		if n == 1 {
			b.small = smallPool.Get().(*[]byte)
			p := *b.small
			p[0] = b.first[0]
			if c := p[0]; err != nil || c == '\n' || c == '\r' {
				// A line end may end an event: it is handed on alone, as
				// the read after it may wait (at the end of an HTTP/1.1
				// chunk or an HTTP/2 frame) for the upstream's next write.
				b.buf, b.r, b.w, b.err = p, 0, 1, err
				b.more, b.short = false, 0
				return nil
			}
			return b.read(p, 1)
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// read reads into p after its first n bytes, already there, and makes p
// the buffer.
func (b *sseInput) read(p []byte, n int) error {
	for range 100 {
		m, err := b.rd.Read(p[n:])
		if m < 0 || m > len(p)-n {
			panic("upstream SSE: the body's reader returned an invalid count")
		}
		n += m
		b.buf, b.r, b.w = p, 0, n
		if n > 0 {
			b.err = err
			switch {
			case n >= sseBufferSize || b.more && n >= sseBufferSize/2:
				b.more, b.short = true, 0
			case b.more && b.short == 0:
				b.short = 1
			default:
				b.more, b.short = false, 0
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// release gives the buffer it holds back to its pool.
func (b *sseInput) release() {
	b.putSmall()
	if b.burst != nil {
		burstPool.Put(b.burst)
		b.burst = nil
	}
	b.buf, b.r, b.w = nil, 0, 0
}

// putSmall gives the small buffer back, if the reader holds one.
func (b *sseInput) putSmall() {
	if b.small != nil {
		smallPool.Put(b.small)
		b.small = nil
	}
}

// ready reports whether a whole event (up to its blank line) is already
// buffered, so reading it will not wait for the network.
func (s *SSEReader) ready() bool {
	b := s.r.buffered()
	if len(b) == 0 {
		return false
	}
	// Two line ends in a row, whichever of LF, CRLF and CR they are.
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r")) || bytes.Contains(b, []byte("\r\r"))
}

// Next returns the next event; io.EOF when the input ends cleanly.
func (s *SSEReader) Next() (SSEEvent, error) {
	s.data, s.bare = s.data[:0], s.bare[:0]
	if ev, ok := s.quick(); ok {
		return ev, nil
	}
	var ev SSEEvent
	hasData, inBare := false, false
	if len(s.carry) > 0 {
		s.bare, s.carry, inBare = append(s.bare, s.carry...), s.carry[:0], true
	}
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && (hasData || len(s.bare) > 0) {
				return s.event(ev, hasData), nil
			}
			return SSEEvent{}, err
		}
		if !s.begun {
			s.begun = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if hasData || len(s.bare) > 0 {
				return s.event(ev, hasData), nil
			}
			ev.Type, inBare = "", false
			continue
		}
		if !inBare && (line[0] == '{' || line[0] == '[') && hasData {
			// JSON right after an event's data, without the blank line:
			// the event ends here and the JSON starts the next one.
			s.carry = append(append(s.carry[:0], line...), '\n')
			return s.event(ev, hasData), nil
		}
		if inBare || line[0] == '{' || line[0] == '[' {
			inBare = true
			s.bare = append(append(s.bare, line...), '\n')
		} else if line[0] != ':' { // a comment otherwise
			name, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(name) {
			case "data":
				s.data = append(append(s.data, value...), '\n')
				hasData = true
			case "event":
				ev.Type = eventType(value)
			}
			// id, retry and unknown fields are ignored.
		}
		if len(s.data)+len(s.bare) > s.max {
			return SSEEvent{}, errEventTooLarge
		}
	}
}

// quick returns the usual event — one `data:` line and a blank line, both
// ending in LF and already buffered — as the loop in Next would, but with
// its data in the read buffer instead of a copy (valid until the next
// call, as Next promises). It reports false for anything else, leaving
// the input as it was.
func (s *SSEReader) quick() (SSEEvent, bool) {
	if !s.begun || s.cr || len(s.carry) > 0 {
		return SSEEvent{}, false // the start (a BOM), a CR to skip, a bare line
	}
	b := s.r.buffered()
	if len(b) < len("data:\n\n") || string(b[:len("data:")]) != "data:" {
		return SSEEvent{}, false
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 || i+1 >= len(b) || b[i+1] != '\n' || bytes.IndexByte(b[:i], '\r') >= 0 {
		return SSEEvent{}, false
	}
	v := b[len("data:"):i]
	if len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	if len(v)+1 > s.max {
		return SSEEvent{}, false // too large: Next's loop says so
	}
	s.r.discard(i + 2)
	return SSEEvent{Data: v, Bare: s.bare}, true
}

func (s *SSEReader) event(ev SSEEvent, hasData bool) SSEEvent {
	if hasData {
		ev.Data = s.data[:len(s.data)-1] // the last "\n"
	}
	ev.Bare = s.bare
	return ev
}

// readLine returns the next line without its line end — LF, CRLF or a
// lone CR, the SSE spec's three; a last line without one is returned before
// io.EOF. A CR last in the buffer may be the first half of a CRLF: the LF,
// if it comes, is skipped by the next call, so a line never waits for the
// byte after it.
func (s *SSEReader) readLine() ([]byte, error) {
	s.long = s.long[:0]
	for {
		buf, err := s.buffered()
		if err != nil {
			if err == io.EOF && len(s.long) > 0 {
				return s.long, nil
			}
			return nil, err
		}
		if s.cr {
			s.cr = false
			if buf[0] == '\n' {
				s.r.discard(1)
				continue
			}
		}
		end, n := lineEnd(buf)
		if n == 0 {
			s.long = append(s.long, buf...)
			s.r.discard(len(buf))
			if len(s.long) > s.max {
				return nil, errEventTooLarge
			}
			continue
		}
		line := buf[:end]
		if len(s.long) > 0 {
			s.long = append(s.long, line...)
			line = s.long
		}
		s.cr = n == 1 && buf[end] == '\r'
		s.r.discard(end + n)
		return line, nil
	}
}

// buffered returns the buffered input, reading more when there is none.
// It is valid until the next read.
func (s *SSEReader) buffered() ([]byte, error) {
	if s.r.r == s.r.w {
		if err := s.r.fill(); err != nil {
			return nil, err
		}
	}
	return s.r.buffered(), nil
}

// lineEnd returns where the first line end of b is and its length: 2 for
// CRLF, 1 for LF or CR, 0 when b has none.
func lineEnd(b []byte) (at, n int) {
	lf := bytes.IndexByte(b, '\n')
	head := b
	if lf >= 0 {
		head = b[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		if cr == lf-1 {
			return cr, 2
		}
		return cr, 1
	}
	if lf >= 0 {
		return lf, 1
	}
	return len(b), 0
}

// eventType returns the event name, without allocating for the names the
// vendors send.
func eventType(b []byte) string {
	switch string(b) {
	case "message_start":
		return "message_start"
	case "content_block_start":
		return "content_block_start"
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_stop":
		return "content_block_stop"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "ping":
		return "ping"
	case "error":
		return "error"
	}
	return string(b)
}
