package protocol

import (
	"context"
	"io"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// Decoder turns one vendor's SSE events into canonical events.
type Decoder interface {
	// decode appends the canonical events of one SSE event to out. done
	// reports that the upstream has said the reply is complete.
	Decode(ev SSEEvent, out []llm.Event) (_ []llm.Event, done bool, err error)
	// finish is called once, when decode reported done (eof false) or the
	// body ended (eof true). It appends the closing llm.EventFinish, or
	// fails for a reply cut short.
	Finish(out []llm.Event, eof bool) ([]llm.Event, error)
}

// httpStream is a Stream read from an upstream SSE body.
type httpStream struct {
	c      *Call
	body   io.ReadCloser
	rd     *SSEReader
	dec    Decoder
	queue  []llm.Event
	pos    int
	cur    llm.Event
	err    error
	ended  bool // nothing more to read upstream
	closed bool
}

var _ upstream.Stream = (*httpStream)(nil)

// StartStream reads up to the first canonical event, so that a failure
// before it is returned here (Backend.Stream's contract), and returns the
// stream holding it.
func StartStream(c *Call, body io.ReadCloser, dec Decoder) (upstream.Stream, error) {
	s := &httpStream{c: c, body: body, rd: NewSSEReader(body, MaxEventSize), dec: dec}
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

// DecodeStream reads body as a stream through dec outside any HTTP call:
// no timeouts and nothing to cancel. It is for fuzzing and benchmarking a
// vendor's decoder.
func DecodeStream(body io.ReadCloser, dec Decoder) (upstream.Stream, error) {
	c := &Call{parent: context.Background()}
	c.ctx, c.cancel = context.WithCancelCause(c.parent)
	return StartStream(c, body, dec)
}

// fill reads one SSE event and queues what it decodes to.
func (s *httpStream) fill() {
	s.queue, s.pos = s.queue[:0], 0
	ev, err := s.rd.Next()
	if err == io.EOF {
		s.end(true)
		return
	}
	if err != nil {
		s.err, s.ended = s.c.fail(err, upstream.MsgConnection), true
		s.c.Release()
		return
	}
	s.c.started()
	var done bool
	s.queue, done, err = s.dec.Decode(ev, s.queue)
	switch {
	case err != nil:
		s.err, s.ended = err, true
		s.c.Release()
	case done:
		s.end(false)
	}
}

func (s *httpStream) end(eof bool) {
	var err error
	s.queue, err = s.dec.Finish(s.queue, eof)
	s.err, s.ended = err, true
	s.c.Release()
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

// UsageSoFar is the usage the upstream has reported so far, when its
// decoder keeps one (see stopStream).
func (s *httpStream) UsageSoFar() (llm.Usage, bool) {
	if su, ok := s.dec.(streamUsage); ok {
		return su.UsageSoFar()
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
	e.Err = upstream.Committed(le.Err)
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
	s.c.Release()
	s.rd.Release()
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
