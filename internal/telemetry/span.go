package telemetry

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// span is one of svcgw's spans: what the call's goroutine records of it,
// in place. It implements trace.Span, so that the server and the router
// hold it and put it in a context as any span. A call's span is made
// with room for its first children (admission, the first attempt, the
// ledger) in the same allocation, and the children it ends before it
// travel with it: when the call's span ends, the queue encodes them all
// as OTLP (otlp.go) onto the batch waiting, while they are still in the
// core's cache, and the allocation goes back to the pool once the server
// is done with it. Nothing else is made on the call's path: no SDK span,
// no snapshot, no attribute slice or map.
//
// A span is written by the goroutine that started it and, once ended,
// only read: what is set on it after End is ignored, as the SDK ignores
// it.
type span struct {
	embedded.Span

	q      *queue // nil: not sampled, nothing is recorded
	sc     trace.SpanContext
	parent trace.SpanID
	remote bool // the parent is the caller's (traceparent)
	kind   trace.SpanKind
	ended  bool

	// The name is name, or name+" "+model when model is set: the
	// concatenation is the exporter's.
	name, model string
	start, end  int64 // Unix nanoseconds

	status codes.Code
	desc   string
	// err is the exception RecordError recorded (one, the last), at
	// errAt; its type and message are read when the span is exported.
	err   error
	errAt int64
	// finish is gen_ai.response.finish_reasons, an array of one: kept
	// as a string so that no slice is made for it per call.
	finish string

	attrs []attr               // svcgw's own, in the span's buffer until it is full
	extra []attribute.KeyValue // what others set (SetAttributes) under other keys

	call   *callSpan // the call's span, of a child started in its context
	inline bool      // a child in its call's allocation (callSpan.inline)
}

// attr is one attribute of svcgw's: its key by number (keys), and its
// value. 32 bytes, where an attribute.KeyValue takes 64.
type attr struct {
	s string
	n uint64 // an int64, a float64's bits, or a bool
	k key
	t valueType
}

type valueType uint8

const (
	tString valueType = iota
	tInt
	tFloat
	tBool
)

// callSpan is a call's span and the first of its children, in one
// allocation, taken from a pool and put back once the server is done
// with it (Release): the queue encodes the spans as they end and keeps
// nothing of them.
type callSpan struct {
	span
	buf  [callAttrs]attr
	refs atomic.Int32

	mu     sync.Mutex
	closed bool    // the call's span ended: later children go alone
	kids   []*span // the children ended before the call, in kidBuf first
	kidBuf [inlineKids]*span
	used   int // inline children started
	inline [inlineKids]childSpan
}

type childSpan struct {
	span
	buf [childAttrs]attr
}

// A call's span holds some 25 attributes; an attempt's about 11; an
// admission's or a ledger's a few. A call has an admission, an attempt
// and a ledger span, and one more attempt for each retry or fallback.
const (
	callAttrs  = 28
	childAttrs = 12
	inlineKids = 3
)

var _ trace.Span = (*span)(nil)

var callSpans = sync.Pool{New: func() any { return new(callSpan) }}

// newCallSpan is a call's span, held by the server until Release.
func newCallSpan() *span {
	c := callSpans.Get().(*callSpan)
	c.attrs = c.buf[:0]
	c.kids = c.kidBuf[:0]
	c.span.call = c
	c.refs.Store(1)
	return &c.span
}

// release puts c back in the pool, cleared.
func (c *callSpan) release() {
	if c.refs.Add(-1) == 0 { // a second Release of the same span does nothing
		// Cleared as *c = callSpan{} would, but only what was used:
		// the attributes' buffers are most of c's 2.7 KB.
		clear(c.buf[:min(len(c.attrs), callAttrs)])
		for i := range c.used {
			k := &c.inline[i]
			clear(k.buf[:min(len(k.attrs), childAttrs)])
			k.span = span{}
		}
		c.span = span{}
		c.closed, c.kids, c.kidBuf, c.used = false, nil, [inlineKids]*span{}, 0
		callSpans.Put(c)
	}
}

// Release tells the tracer the server is done with a call's span (sp,
// from StartCall): after its End, and after reading its trace id for the
// access log. Nothing may use sp, or a context holding it, after it.
func Release(sp trace.Span) {
	if s := spanOf(sp); s != nil && s.call != nil && &s.call.span == s {
		s.call.release()
	}
}

// newChild is a child span of the call c (nil: of no call of this
// process): one of c's own while it has room.
func newChild(c *callSpan) *span {
	var s *childSpan
	if c != nil {
		c.mu.Lock()
		if c.used < inlineKids {
			s = &c.inline[c.used]
			s.inline = true
			c.used++
		}
		c.mu.Unlock()
	}
	if s == nil {
		s = new(childSpan)
	}
	s.attrs = s.buf[:0]
	s.call = c
	return &s.span
}

// now is the wall clock's time in Unix nanoseconds, read as the
// monotonic clock's time since the anchor: one clock read where
// time.Now takes two (wall and monotonic), and a span's ends are read
// eight times a call. The exporting goroutine sets the anchor again at
// every export (reanchor), so that a step of the wall clock reaches the
// spans within one BatchDelay.
func now() int64 {
	a := clockAnchor.Load()
	return a.unix + int64(time.Since(a.t))
}

type anchor struct {
	t    time.Time // with its monotonic reading
	unix int64
}

var clockAnchor atomic.Pointer[anchor]

func reanchor() {
	t := time.Now()
	clockAnchor.Store(&anchor{t: t, unix: t.UnixNano()})
}

func init() { reanchor() }

func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// startChild starts a span as a child of the span ctx holds (of its
// trace, sampled as it is), and returns ctx with it.
func (t *Tracer) startChild(ctx context.Context, kind trace.SpanKind, name string) (context.Context, *span) {
	var c *callSpan
	if p := spanOf(trace.SpanFromContext(ctx)); p != nil {
		c = p.call
	}
	s := newChild(c)
	psc := trace.SpanContextFromContext(ctx)
	tid := psc.TraceID()
	if !psc.IsValid() {
		tid = newTraceID()
	}
	s.sc = trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: newSpanID(), TraceFlags: psc.TraceFlags(), TraceState: psc.TraceState(),
	})
	s.parent = psc.SpanID()
	s.remote = psc.IsRemote()
	s.kind, s.name = kind, name
	if psc.IsSampled() {
		s.q = t.queue
		s.start = now()
	}
	return trace.ContextWithSpan(ctx, s), s
}

// The setters of svcgw's attributes: str, int, float and boolean add one
// the span does not have yet; put replaces one of the same key.
func (s *span) add(a attr) {
	if s.q != nil && !s.ended {
		s.attrs = append(s.attrs, a)
	}
}

func (s *span) str(k key, v string) { s.add(attr{k: k, t: tString, s: v}) }
func (s *span) int(k key, v int)    { s.add(attr{k: k, t: tInt, n: uint64(v)}) }
func (s *span) float(k key, v float64) {
	s.add(attr{k: k, t: tFloat, n: math.Float64bits(v)})
}

func (s *span) bool(k key, v bool) {
	a := attr{k: k, t: tBool}
	if v {
		a.n = 1
	}
	s.add(a)
}

func (s *span) put(a attr) {
	if s.q == nil || s.ended {
		return
	}
	for i := range s.attrs {
		if s.attrs[i].k == a.k {
			s.attrs[i] = a
			return
		}
	}
	s.attrs = append(s.attrs, a)
}

// End ends the span now. A call's span goes to the queue with the
// children it ended before it; a child ended before its call waits for
// it.
func (s *span) End(...trace.SpanEndOption) {
	if s.ended {
		return
	}
	s.ended = true
	if s.q == nil {
		return
	}
	s.end = now()
	c := s.call
	switch {
	case c == nil:
		s.q.push(s)
	case &c.span == s:
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		s.q.push(s)
	default:
		c.mu.Lock()
		if !c.closed {
			c.kids = append(c.kids, s)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		s.q.push(s)
	}
}

// children is the children that ended before s, a call's span, did, and
// go to the collector with it.
func (s *span) children() []*span {
	if c := s.call; c != nil && &c.span == s {
		return c.kids
	}
	return nil
}

// AddEvent is not recorded: svcgw's spans carry no events but the
// exception RecordError records.
func (s *span) AddEvent(string, ...trace.EventOption) {}

// AddLink is not recorded: svcgw's spans have no links.
func (s *span) AddLink(trace.Link) {}

func (s *span) IsRecording() bool { return s.q != nil && !s.ended }

// RecordError records err as the span's exception event.
func (s *span) RecordError(err error, _ ...trace.EventOption) {
	if err != nil && s.IsRecording() {
		s.err, s.errAt = err, now()
	}
}

func (s *span) SpanContext() trace.SpanContext { return s.sc }

// SetStatus sets the span's status as the SDK does: Ok is final, and
// only Error keeps a description.
func (s *span) SetStatus(code codes.Code, desc string) {
	if !s.IsRecording() || code == codes.Unset || s.status == codes.Ok {
		return
	}
	s.status, s.desc = code, ""
	if code == codes.Error {
		s.desc = desc
	}
}

func (s *span) SetName(name string) {
	if s.IsRecording() {
		s.name, s.model = name, ""
	}
}

// SetAttributes records attributes others set, replacing those of the
// same key.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	if !s.IsRecording() {
		return
	}
next:
	for _, a := range kv {
		for i := range s.extra {
			if s.extra[i].Key == a.Key {
				s.extra[i] = a
				continue next
			}
		}
		s.extra = append(s.extra, a)
	}
}

func (s *span) TracerProvider() trace.TracerProvider { return noop.NewTracerProvider() }

// spanOf is sp as svcgw's span, or nil when it is not one.
func spanOf(sp trace.Span) *span {
	s, _ := sp.(*span)
	return s
}
