package sqlite

import (
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// With one P, a goroutine whose socket became readable is woken only when
// the scheduler polls the network; yieldCPU must let it run before the
// ledger goes on, as a call that arrives during a commit must run between
// two of its statements (runtime.Gosched alone does not poll:
// BenchmarkLedgerTailNet measures the difference).
func TestYieldCPU_RunsWhatTheNetworkWoke(t *testing.T) {
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
	const bytes = 200
	first := 0
	for i := int64(1); i <= bytes; i++ {
		if _, err := client.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, server)
		yieldCPU()
		// Mostly the reader has run by now. Once in 61 schedules the
		// scheduler takes the global run queue first, and the ledger's
		// wake-up can go before it: then it runs at the next yield, one
		// statement later — but never later than that.
		switch n := got.Load(); {
		case n == i:
			first++
		case n < i-1:
			t.Fatalf("byte %d: the reader had read %d bytes when yieldCPU returned; want it to have run by the next yield", i, n)
		}
	}
	yieldCPU()
	if n := got.Load(); n != bytes {
		t.Fatalf("the reader read %d bytes of %d", n, bytes)
	}
	if first < bytes*9/10 {
		t.Errorf("the reader ran before yieldCPU returned for %d bytes of %d; want nearly all", first, bytes)
	}
}

// waitReadable returns once the kernel holds unread bytes for c (loopback
// TCP may queue a write's bytes on the other socket a moment after the
// write returns), without reading them or waking c's reader.
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

// BenchmarkYieldCPU is what one yield costs the ledger with nothing else to
// run (the CPU a commit pays per statement): Gosched alone against
// netYield's pipe round.
func BenchmarkYieldCPU(b *testing.B) {
	for _, v := range []string{"gosched", "net"} {
		b.Run("yield="+v, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			goschedYield.Store(v == "gosched")
			defer goschedYield.Store(false)
			cpu0 := processCPU()
			for b.Loop() {
				yieldCPU()
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
