package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Reading upstream SSE.
//
// STYLE.md says to read upstream SSE with go-sse's sse.Read and an explicit
// MaxEventSize. This small reader replaces it here, for three reasons:
//
//   - sse.Read drops every line that is not an SSE field, as the SSE spec
//     says, but Gemini may report a mid-stream error as a bare JSON object
//     without a data: prefix (generate-content.md §5), and an
//     OpenAI-compatible server may answer a stream request with a plain
//     JSON error body and status 200. Dropped, those would look like a
//     stream cut short, losing the error's kind (429 vs 503) and its
//     retry guidance.
//   - sse.Read is a push iterator, while Stream is pulled like sql.Rows;
//     bridging them needs iter.Pull, a coroutine per stream.
//   - It hands out each event's data in a reused buffer, so decoding a
//     frame allocates only what the JSON decoder does.
//
// It keeps go-sse's limits: an explicit maximum event size, and an event
// still pending at EOF is dispatched. Lines end with LF, CRLF or a lone CR,
// as the SSE spec says. A UTF-8 BOM at the start is skipped.

// errEventTooLarge is returned for an event over the reader's maximum.
var errEventTooLarge = errors.New("upstream SSE event too large")

// sseEvent is one event. Data and Bare are valid until the next call to
// next.
type sseEvent struct {
	Type string // the event field; "" when absent
	Data []byte // the data lines joined by "\n"
	// Bare holds lines that are not SSE fields: a JSON object or array
	// written without data: (it starts at a line beginning with { or [,
	// which also ends an event in progress, and runs to the next blank
	// line).
	Bare []byte
}

type sseReader struct {
	r          *bufio.Reader
	max        int
	data, bare []byte
	carry      []byte // a bare line that ended the previous event
	long       []byte // a line longer than the bufio buffer
	begun      bool
	cr         bool // the last line ended with a CR: skip a LF right after it
}

// sseBufferSize is the read buffer of one upstream stream. Events are
// usually a few hundred bytes (a chat-completions chunk is ~250); longer
// lines are gathered in sseReader.long, so a small buffer only costs an
// extra copy for big events, while 1,000 open streams hold 1 MiB instead of
// 4 (the connection under it has its own 4 KiB read buffer).
const sseBufferSize = 1 << 10

func newSSEReader(r io.Reader, maxEvent int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, sseBufferSize), max: maxEvent}
}

// ready reports whether a whole event (up to its blank line) is already
// buffered, so reading it will not wait for the network.
func (s *sseReader) ready() bool {
	n := s.r.Buffered()
	if n == 0 {
		return false
	}
	// Two line ends in a row, whichever of LF, CRLF and CR they are.
	b, _ := s.r.Peek(n)
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r")) || bytes.Contains(b, []byte("\r\r"))
}

// next returns the next event; io.EOF when the input ends cleanly.
func (s *sseReader) next() (sseEvent, error) {
	s.data, s.bare = s.data[:0], s.bare[:0]
	var ev sseEvent
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
			return sseEvent{}, err
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
			return sseEvent{}, errEventTooLarge
		}
	}
}

func (s *sseReader) event(ev sseEvent, hasData bool) sseEvent {
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
func (s *sseReader) readLine() ([]byte, error) {
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
				_, _ = s.r.Discard(1)
				continue
			}
		}
		end, n := lineEnd(buf)
		if n == 0 {
			s.long = append(s.long, buf...)
			_, _ = s.r.Discard(len(buf))
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
		_, _ = s.r.Discard(end + n)
		return line, nil
	}
}

// buffered returns the buffered input, reading more when there is none.
// It is valid until the next read.
func (s *sseReader) buffered() ([]byte, error) {
	if s.r.Buffered() == 0 {
		if _, err := s.r.Peek(1); err != nil {
			return nil, err
		}
	}
	return s.r.Peek(s.r.Buffered())
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

// streamDecoder turns one vendor's SSE events into canonical events.
type streamDecoder interface {
	// decode appends the canonical events of one SSE event to out. done
	// reports that the upstream has said the reply is complete.
	decode(ev sseEvent, out []llm.Event) (_ []llm.Event, done bool, err error)
	// finish is called once, when decode reported done (eof false) or the
	// body ended (eof true). It appends the closing llm.EventFinish, or
	// fails for a reply cut short.
	finish(out []llm.Event, eof bool) ([]llm.Event, error)
}

// httpStream is a Stream read from an upstream SSE body.
type httpStream struct {
	c      *call
	body   io.ReadCloser
	rd     *sseReader
	dec    streamDecoder
	queue  []llm.Event
	pos    int
	cur    llm.Event
	err    error
	ended  bool // nothing more to read upstream
	closed bool
}

var _ Stream = (*httpStream)(nil)

// startStream reads up to the first canonical event, so that a failure
// before it is returned here (Backend.Stream's contract), and returns the
// stream holding it.
func startStream(c *call, body io.ReadCloser, dec streamDecoder) (Stream, error) {
	s := &httpStream{c: c, body: body, rd: newSSEReader(body, maxEventSize), dec: dec}
	for len(s.queue) == 0 && s.err == nil && !s.ended {
		s.fill()
	}
	if len(s.queue) == 0 && s.err != nil {
		err := s.err
		s.Close()
		return nil, err
	}
	return s, nil
}

// fill reads one SSE event and queues what it decodes to.
func (s *httpStream) fill() {
	s.queue, s.pos = s.queue[:0], 0
	ev, err := s.rd.next()
	if err == io.EOF {
		s.end(true)
		return
	}
	if err != nil {
		s.err, s.ended = s.c.fail(err, msgConnection), true
		s.c.release()
		return
	}
	s.c.started()
	var done bool
	s.queue, done, err = s.dec.decode(ev, s.queue)
	switch {
	case err != nil:
		s.err, s.ended = err, true
		s.c.release()
	case done:
		s.end(false)
	}
}

func (s *httpStream) end(eof bool) {
	var err error
	s.queue, err = s.dec.finish(s.queue, eof)
	s.err, s.ended = err, true
	s.c.release()
}

func (s *httpStream) Next() bool {
	for s.pos >= len(s.queue) {
		if s.ended || s.closed {
			return false
		}
		s.fill()
	}
	s.cur = s.queue[s.pos]
	s.pos++
	return true
}

func (s *httpStream) Event() llm.Event { return s.cur }

// usageSoFar is the usage the upstream has reported so far, when its
// decoder keeps one (see stopStream).
func (s *httpStream) usageSoFar() (llm.Usage, bool) {
	if su, ok := s.dec.(streamUsage); ok {
		return su.usageSoFar()
	}
	return llm.Usage{}, false
}

// Ready reports whether Next can return without waiting: decoded events are
// queued, a whole event is buffered, or the stream has ended.
func (s *httpStream) Ready() bool {
	return s.pos < len(s.queue) || s.ended || s.closed || s.rd.ready()
}

// Err reports why the stream ended early. Such an error comes after the
// stream's first event, so Retryable reports false for it.
func (s *httpStream) Err() error {
	if s.err == nil {
		return nil
	}
	le, ok := s.err.(*llm.Error)
	if !ok {
		return s.err // the caller's own cancellation
	}
	e := *le
	e.Err = &committedError{err: le.Err}
	return &e
}

// Close releases the stream. After a clean end it first reads what is left
// of the body (the chunked terminator, usually a few bytes), so that an
// HTTP/1.1 upstream — a local vLLM or llama.cpp server — gets its
// connection back into the pool instead of a new one per stream; the read
// is bounded in size and in time (drainTimeout), so a server that keeps the
// body open costs at most that.
func (s *httpStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.c.release()
	if s.ended && s.err == nil {
		t := time.AfterFunc(drainTimeout, func() { s.body.Close() })
		_, _ = io.CopyN(io.Discard, s.body, drainLimit)
		t.Stop()
	}
	return s.body.Close()
}

// drainLimit and drainTimeout bound how much of a finished stream's body
// Close reads to reuse its connection.
const (
	drainLimit   = 4 << 10
	drainTimeout = 50 * time.Millisecond
)
