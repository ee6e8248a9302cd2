package telemetry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// queue is between the calls and the collector. A call's goroutine, as
// its span ends, encodes it and the children it ended before it as OTLP
// (otlp.go) onto the batch waiting, under a lock held for that alone
// (about a microsecond), never waiting for the collector: the spans are
// encoded while their memory is still in the core's cache, and the
// call's allocation goes back to the pool at once. One goroutine sends
// the waiting spans in requests of at most BatchSize spans: the full
// batches as soon as there is one (the rest waits for the next), and all
// of them every BatchDelay. A collector refuses a request over its
// limit (gRPC's is 4 MiB by default), and with it every span in it;
// BatchSize keeps each request to a size it takes. At most
// QueueSize spans wait: a span that finds the batch full is dropped and
// counted, and so is every span of a batch the collector could not be
// sent: a collector that is slow or gone costs spans, never a call's
// time.
//
// The SDK's BatchSpanProcessor behaves the same way but does not say how
// many spans it dropped; the operator's /metrics does (Spans).
type queue struct {
	send     sender
	preamble preamble
	size     int // spans that may wait
	batch    int
	delay    time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	spans   []byte // the waiting spans, encoded: ScopeSpans.spans fields
	waiting int    // how many
	// cuts are the offsets in spans where each full batch of the
	// waiting spans ends: after span batch, 2×batch, and so on.
	cuts  []int
	ready chan struct{}

	queueFull    atomic.Uint64
	exportFailed atomic.Uint64
	exported     atomic.Uint64

	// spare is the exporting goroutine's: the batch it swapped out last.
	// The spans' buffers begin with the preamble's headroom, where the
	// request's first fields are written as it is sent.
	spare     []byte
	spareCuts []int

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// newQueue starts a queue of size spans sending to s in batches of
// batch spans, at least every delay, each send given timeout.
func newQueue(s sender, p preamble, size, batch int, delay, timeout time.Duration) *queue {
	q := &queue{
		send: s, preamble: p, size: size,
		batch: batch, delay: delay, timeout: timeout,
		ready: make(chan struct{}, 1),
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	q.spans = make([]byte, p.headroom())
	go q.run()
	return q
}

// push encodes an ended span, with the children that travel with it,
// onto the waiting batch, or drops them when the batch is full; then
// lets go of the call's allocation.
func (q *queue) push(s *span) {
	kids := s.children()
	n := 1 + len(kids)
	q.mu.Lock()
	if q.waiting+n > q.size {
		q.mu.Unlock()
		q.queueFull.Add(uint64(n))
		return
	}
	q.append(s)
	for _, k := range kids {
		q.append(k)
	}
	full := len(q.cuts) > 0
	q.mu.Unlock()
	if full {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
}

// append encodes one span onto the waiting ones and marks where a full
// batch ends. q.mu is held.
func (q *queue) append(s *span) {
	q.spans = appendSpan(q.spans, s)
	q.waiting++
	if q.waiting%q.batch == 0 {
		q.cuts = append(q.cuts, len(q.spans))
	}
}

func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.delay)
	defer t.Stop()
	for {
		select {
		case <-q.ready:
			q.export(false)
		case <-t.C:
			q.export(true)
		case ack := <-q.flush:
			q.export(true)
			close(ack)
		case <-q.stop:
			q.export(true)
			return
		}
	}
}

// export sends the full batches waiting now, or all the spans waiting
// when all is set, one request of at most batch spans each; the spans of
// a failed request are counted as dropped. The spans of a batch not
// sent, fewer than batch, stay in the queue for the next export.
func (q *queue) export(all bool) {
	h := q.preamble.headroom()
	if q.spare == nil {
		q.spare = make([]byte, h)
	}
	q.mu.Lock()
	spans, n, cuts := q.spans, q.waiting, q.cuts
	end := len(spans)
	if !all {
		if len(cuts) == 0 {
			q.mu.Unlock()
			return
		}
		end = cuts[len(cuts)-1]
		n = len(cuts) * q.batch
	}
	// What is left, fewer than batch spans, begins the next batch.
	q.spans = append(q.spare[:h], spans[end:]...)
	q.waiting -= n
	q.cuts = q.spareCuts[:0]
	q.mu.Unlock()
	q.spare, q.spareCuts = spans, cuts
	reanchor()
	if n == 0 {
		return
	}
	if all && (len(cuts) == 0 || cuts[len(cuts)-1] != end) {
		cuts = append(cuts, end) // the last batch, not full
		q.spareCuts = cuts
	}
	// Each batch is sent with the request's first fields written in the
	// headroom before it: the buffer's own for the first, the end of the
	// batch before (sent already) for the others.
	from, held := h, false
	for i, to := range cuts {
		k := q.batch
		if i == len(cuts)-1 {
			k = n - i*q.batch
		}
		buf := spans[from-h : to]
		if held { // the transport may still hold the batches before
			buf = append(make([]byte, h, h+to-from), spans[from:to]...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		err := q.send.send(ctx, q.preamble.request(buf))
		cancel()
		if err != nil {
			q.exportFailed.Add(uint64(k))
			held = true
		} else {
			q.exported.Add(uint64(k))
		}
		from = to
	}
	if held {
		q.spare, q.spareCuts = nil, nil
	}
}

// ForceFlush exports what is waiting now, waiting at most until ctx ends.
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

// Shutdown exports what is waiting and closes the sender, waiting at
// most until ctx ends.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), q.send.shutdown(ctx))
	}
	return q.send.shutdown(ctx)
}
