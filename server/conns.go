package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Connection limits (see ServeOptions).
const (
	// DefaultHeaderTimeout bounds reading a request's headers.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 120 * time.Second
	// maxDefaultConns caps the default connection limit where the file
	// limit is very high: past it, memory (a few tens of KiB per
	// connection) is the limit, not descriptors.
	maxDefaultConns = 65536
	// fdReserve is what the default leaves of the file limit for
	// everything that is not a caller's connection: the database and its
	// journal, the listener, logs, DNS.
	fdReserve = 256
)

// DefaultMaxConns is the default cap on open caller connections, derived
// from the process's file-descriptor limit (RLIMIT_NOFILE, which Go raises
// to its hard limit at start-up): every caller connection may hold an
// upstream connection too, so half of what is left after fdReserve, at
// least 64 and at most 65,536. With the common limits: 1,024 → 384,
// 4,096 → 1,920, 20,000 → 9,872, 1,048,576 → 65,536.
func DefaultMaxConns() int {
	return maxConnsFor(fileLimit())
}

func maxConnsFor(nofile uint64) int {
	if nofile <= 2*64+fdReserve {
		return 64
	}
	return int(min((nofile-fdReserve)/2, maxDefaultConns))
}

// limitListener caps the connections open at once. Accept takes a slot
// before accepting, so connections beyond the cap wait in the kernel's
// accept backlog (they are not refused, and are served in order as slots
// free up); closing a connection frees its slot.
//
// Idle keep-alive connections must not keep new callers waiting: when the
// open connections reach nine tenths of the cap, and again every
// pressureTick while Accept waits for a slot, closeIdle closes those that
// have been idle (or have sent nothing since they opened) for at least
// pressureMinIdle, which their clients reopen when they next need one. A
// client making calls back to back is never idle that long, so it keeps
// its connection while the cap is under pressure.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	high      int
	closeIdle func()
	log       *slog.Logger
	warned    time.Time // when the log last said the cap was reached
	done      chan struct{}
	closeOnce sync.Once
	open      atomic.Int64 // connections open now, against high
}

// pressureTick is how often a full listener closes the connections that
// have gone idle since; pressureMinIdle is how long a connection must have
// been idle for that.
const (
	pressureTick    = 250 * time.Millisecond
	pressureMinIdle = time.Second
)

// idleConns knows since when each open connection has been idle (or new):
// it is the server's ConnState hook.
type idleConns struct {
	mu   sync.Mutex
	idle map[net.Conn]time.Time
}

func newIdleConns() *idleConns { return &idleConns{idle: make(map[net.Conn]time.Time)} }

func (t *idleConns) track(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		t.idle[c] = time.Now()
	default: // active, hijacked, closed
		delete(t.idle, c)
	}
}

// closeIdle closes the connections idle for at least minIdle.
func (t *idleConns) closeIdle(minIdle time.Duration) {
	cutoff := time.Now().Add(-minIdle)
	var victims []net.Conn
	t.mu.Lock()
	for c, since := range t.idle {
		if since.Before(cutoff) {
			victims = append(victims, c)
			delete(t.idle, c)
		}
	}
	t.mu.Unlock()
	for _, c := range victims {
		c.Close()
	}
}

func newLimitListener(ln net.Listener, max int, closeIdle func(), log *slog.Logger) *limitListener {
	return &limitListener{
		Listener:  ln,
		log:       log,
		slots:     make(chan struct{}, max),
		high:      max - max/10,
		closeIdle: closeIdle,
		done:      make(chan struct{}),
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	if n := l.open.Add(1); n >= int64(l.high) {
		l.closeIdle()
	}
	return &limitedConn{Conn: c, l: l}, nil
}

// acquire takes a slot, waiting (and closing idle connections) while none
// is free.
func (l *limitListener) acquire() error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	// Only the accepting goroutine gets here: warned needs no lock.
	if now := time.Now(); now.Sub(l.warned) > time.Minute {
		l.warned = now
		l.log.Warn("connection limit reached: new connections wait in the accept backlog, idle ones are closed",
			"max_connections", cap(l.slots))
	}
	l.closeIdle()
	t := time.NewTicker(pressureTick)
	defer t.Stop()
	for {
		select {
		case l.slots <- struct{}{}:
			return nil
		case <-l.done:
			return net.ErrClosed
		case <-t.C:
			l.closeIdle()
		}
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn frees its slot when closed (once).
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

// CloseWrite lets net/http close its side first and linger, so a caller
// refused mid-body still reads the reply (see bodyGuard).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
