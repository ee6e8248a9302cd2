package telemetry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// queue is between the calls and the collector: a bounded channel that a
// call's goroutine hands its ended spans to without ever waiting (a
// call's span with the children it ended before it, as one entry), and one
// goroutine that encodes them as OTLP and sends them in batches. A span
// that finds the queue full is dropped and counted, and so is every span
// of a batch the collector could not be sent: a collector that is slow
// or gone costs spans, never a call's time.
//
// The SDK's BatchSpanProcessor behaves the same way but does not say how
// many spans it dropped; the operator's /metrics does (Spans).
type queue struct {
	send     sender
	preamble preamble
	spans    chan *span
	batch    int
	delay    time.Duration
	timeout  time.Duration

	queueFull    atomic.Uint64
	exportFailed atomic.Uint64
	exported     atomic.Uint64

	body []byte // the encoded batch, reused
	n    int    // spans in the batch: an entry is a span and the children that travel with it

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// newQueue starts a queue of size spans sending to s in batches of up to
// batch spans, at least every delay, each send given timeout.
func newQueue(s sender, p preamble, size, batch int, delay, timeout time.Duration) *queue {
	q := &queue{
		send: s, preamble: p, spans: make(chan *span, size),
		batch: batch, delay: delay, timeout: timeout,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go q.run()
	return q
}

// push queues an ended span, with the children that travel with it, or
// drops them when the queue is full.
func (q *queue) push(s *span) {
	select {
	case q.spans <- s:
	default:
		q.queueFull.Add(uint64(1 + len(s.children())))
		s.done()
	}
}

func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.delay)
	defer t.Stop()
	buf := make([]*span, 0, q.batch)
	for {
		select {
		case s := <-q.spans:
			if buf = q.add(buf, s); q.n >= q.batch {
				buf = q.export(buf)
			}
		case <-t.C:
			buf = q.export(buf)
		case ack := <-q.flush:
			buf = q.export(q.drain(buf))
			close(ack)
		case <-q.stop:
			q.export(q.drain(buf))
			return
		}
	}
}

// drain appends to buf what the queue holds now, exporting full batches.
func (q *queue) drain(buf []*span) []*span {
	for {
		select {
		case s := <-q.spans:
			if buf = q.add(buf, s); q.n >= q.batch {
				buf = q.export(buf)
			}
		default:
			return buf
		}
	}
}

// add appends s to the batch, counting its spans.
func (q *queue) add(buf []*span, s *span) []*span {
	q.n += 1 + len(s.children())
	return append(buf, s)
}

// export encodes and sends buf and returns it emptied; the spans of a
// failed send are counted as dropped.
func (q *queue) export(buf []*span) []*span {
	if len(buf) == 0 {
		return buf
	}
	q.body = q.preamble.appendRequest(q.body[:0], buf)
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	err := q.send.send(ctx, q.body)
	cancel()
	if err != nil {
		q.exportFailed.Add(uint64(q.n))
		q.body = nil // the transport may still hold it
	} else {
		q.exported.Add(uint64(q.n))
	}
	q.n = 0
	for _, s := range buf {
		s.done()
	}
	clear(buf)
	return buf[:0]
}

// ForceFlush exports what is queued now, waiting at most until ctx ends.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and closes the sender, waiting at most
// until ctx ends.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), q.send.shutdown(ctx))
	}
	return q.send.shutdown(ctx)
}
