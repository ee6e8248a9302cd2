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
// network (YieldCPU). store/sqlite's TestYieldCPU_RunsWhatTheNetworkWoke
// holds the yield itself over many rounds.
func TestSlicer_YieldsToTheNetworkEachSlice(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	var got atomic.Int64
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
