package store

import (
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// With one P, a read that gives up the processor with a Slicer must let a
// goroutine the network woke run at its next yield once a slice has
// passed, and not yield before: runtime.Gosched alone does not poll the
// network (YieldCPU). TestYieldCPU_RunsWhatTheNetworkWoke holds the yield
// itself over many rounds.
// readerPair is a connected loopback pair with a goroutine reading the
// server's end byte by byte through the network poller, counting in got,
// already waiting there; GOMAXPROCS is 1 until the test ends.
func readerPair(t *testing.T) (client, server net.Conn, got *atomic.Int64) {
	t.Helper()
	t.Cleanup(func(n int) func() { return func() { runtime.GOMAXPROCS(n) } }(runtime.GOMAXPROCS(1)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	got = new(atomic.Int64)
	go func() {
		var b [1]byte
		for {
			if _, err := server.Read(b[:]); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	time.Sleep(time.Millisecond) // the reader waits in the poller
	return client, server, got
}

// With one P, a goroutine whose socket became readable is woken only when
// the scheduler polls the network; YieldCPU must let it run before its
// caller goes on, as a call that arrives during a ledger commit must run
// between two of its statements (runtime.Gosched alone does not poll:
// store/sqlite's BenchmarkLedgerTailNet measures the difference).
func TestYieldCPU_RunsWhatTheNetworkWoke(t *testing.T) {
	client, server, got := readerPair(t)
	const bytes = 200
	first := 0
	for i := int64(1); i <= bytes; i++ {
		if _, err := client.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, server)
		YieldCPU()
		// Mostly the reader has run by now. Once in 61 schedules the
		// scheduler takes the global run queue first, and the caller's
		// wake-up can go before it: then it runs at the next yield, one
		// step later — but never later than that.
		switch n := got.Load(); {
		case n == i:
			first++
		case n < i-1:
			t.Fatalf("byte %d: the reader had read %d bytes when YieldCPU returned; want it to have run by the next yield", i, n)
		}
	}
	YieldCPU()
	if n := got.Load(); n != bytes {
		t.Fatalf("the reader read %d bytes of %d", n, bytes)
	}
	if first < bytes*9/10 {
		t.Errorf("the reader ran before YieldCPU returned for %d bytes of %d; want nearly all", first, bytes)
	}
}

func TestSlicer_YieldsToTheNetworkEachSlice(t *testing.T) {
	client, server, got := readerPair(t)
	var s Slicer
	s.Yield() // starts the slice
	const rounds = 100
	ran := 0
	for i := int64(1); i <= rounds; i++ {
		if _, err := client.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, server)
		s.since = time.Now() // a slice has just begun: no yield
		s.Yield()
		if n := got.Load(); n != i-1 {
			t.Fatalf("round %d: the reader had read %d bytes after a Yield within the slice; want %d (no yield)", i, n, i-1)
		}
		s.since = time.Now().Add(-ReadSlice) // the slice is over
		s.Yield()
		// Once in 61 schedules the scheduler takes the global run queue
		// first, and the reader runs at the yield after.
		if got.Load() == i {
			ran++
		}
		s.since = time.Now().Add(-ReadSlice)
		s.Yield()
		if n := got.Load(); n != i {
			t.Fatalf("round %d: the reader had read %d bytes after two yields past the slice; want %d", i, n, i)
		}
	}
	if ran < rounds*9/10 {
		t.Errorf("the reader ran at the first yield past the slice in %d rounds of %d; want nearly all", ran, rounds)
	}
}

// waitReadable returns once the kernel holds unread bytes for c, without
// reading them or waking c's reader.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for range 100000 {
		var n int
		if err := rc.Control(func(fd uintptr) {
			const fionread = 0x541B // SIOCINQ
			_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, fionread, uintptr(unsafe.Pointer(&n)))
			if errno != 0 {
				n = -1
			}
		}); err != nil || n < 0 {
			t.Fatal("FIONREAD:", err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("the written byte never reached the other socket")
}
