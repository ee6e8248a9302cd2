package server

import (
	"log/slog"
	"sync"
	"time"
)

// logSampler keeps floods of caller faults out of the operator's log: a
// client can send thousands of requests a second that are refused before
// they cost anything (a missing key, an exhausted rate limit, a path that
// does not exist), and one WARN line for each would be megabytes a second.
// For each 4xx status, the first sampleBurst access lines of every second
// are written as usual; the rest are counted, and one line a second says
// how many were not written. 5xx lines (our own failures) are never
// sampled.
type logSampler struct {
	log *slog.Logger

	mu      sync.Mutex
	start   time.Time // of the current one-second window
	counts  map[int]*sampled
	pending bool // a summary is scheduled
}

type sampled struct{ logged, dropped int }

// sampleBurst is how many access lines of one 4xx status are written per
// second before the rest are only counted.
const sampleBurst = 10

func newLogSampler(log *slog.Logger) *logSampler {
	return &logSampler{log: log, counts: make(map[int]*sampled)}
}

// allow reports whether the access line of a response with status is
// written, counting it when it is not.
func (ls *logSampler) allow(status int) bool {
	if status < 400 || status >= 500 {
		return true
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if now := time.Now(); now.Sub(ls.start) >= time.Second {
		ls.start = now
		for _, c := range ls.counts {
			c.logged = 0
		}
	}
	c := ls.counts[status]
	if c == nil {
		c = &sampled{}
		ls.counts[status] = c
	}
	if c.logged < sampleBurst {
		c.logged++
		return true
	}
	c.dropped++
	if !ls.pending {
		ls.pending = true
		time.AfterFunc(time.Second, ls.summarize)
	}
	return false
}

// summarize writes one line per status for the lines not written.
func (ls *logSampler) summarize() {
	type line struct{ status, n int }
	var lines []line
	ls.mu.Lock()
	for st, c := range ls.counts {
		if c.dropped > 0 {
			lines = append(lines, line{st, c.dropped})
			c.dropped = 0
		}
	}
	ls.pending = false
	ls.mu.Unlock()
	for _, l := range lines {
		ls.log.Warn("requests not logged one by one", "status", l.status, "requests", l.n,
			"per_second", sampleBurst, "window", time.Second.String())
	}
}
