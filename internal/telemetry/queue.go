package telemetry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is the span processor between the calls and the exporter: a
// bounded channel that a call's goroutine hands its ended spans to without
// ever waiting, and one goroutine that exports them in batches. A span
// that finds the queue full is dropped and counted, and so is every span
// of a batch the exporter could not deliver: a collector that is slow or
// gone costs spans, never a call's time.
//
// The SDK's BatchSpanProcessor behaves the same way but does not say how
// many spans it dropped; the operator's /metrics does (Dropped).
type queue struct {
	exp     sdktrace.SpanExporter
	spans   chan sdktrace.ReadOnlySpan
	batch   int
	delay   time.Duration
	timeout time.Duration

	queueFull    atomic.Uint64
	exportFailed atomic.Uint64
	exported     atomic.Uint64

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

var _ sdktrace.SpanProcessor = (*queue)(nil)

// newQueue starts a queue of size spans exporting to exp in batches of up
// to batch spans, at least every delay, each export given timeout.
func newQueue(exp sdktrace.SpanExporter, size, batch int, delay, timeout time.Duration) *queue {
	q := &queue{
		exp: exp, spans: make(chan sdktrace.ReadOnlySpan, size),
		batch: batch, delay: delay, timeout: timeout,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go q.run()
	return q
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues an ended span, or drops it when the queue is full.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.spans <- s:
	default:
		q.queueFull.Add(1)
	}
}

func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.delay)
	defer t.Stop()
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	for {
		select {
		case s := <-q.spans:
			if buf = append(buf, s); len(buf) >= q.batch {
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
func (q *queue) drain(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
		select {
		case s := <-q.spans:
			if buf = append(buf, s); len(buf) >= q.batch {
				buf = q.export(buf)
			}
		default:
			return buf
		}
	}
}

// export sends buf and returns it emptied; the spans of a failed export
// are counted as dropped.
func (q *queue) export(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(buf) == 0 {
		return buf
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	err := q.exp.ExportSpans(ctx, buf)
	cancel()
	if err != nil {
		q.exportFailed.Add(uint64(len(buf)))
	} else {
		q.exported.Add(uint64(len(buf)))
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

// Shutdown exports what is queued and shuts the exporter down, waiting at
// most until ctx ends.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), q.exp.Shutdown(ctx))
	}
	return q.exp.Shutdown(ctx)
}
