//go:build linux

package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
)

// TestServe_DiskFullFailsClosedAndRecovers puts the database on a real
// 3 MiB filesystem and fills it while calls run. The gateway must stop
// admitting billable calls (503 with Retry-After) instead of answering
// them for free, say why once, keep every answered call's generation, and
// record them all once there is room again, reconciling exactly.
func TestServe_DiskFullFailsClosedAndRecovers(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=3m"); err != nil {
		t.Skipf("skipping the real full-disk test: cannot mount a 3 MiB tmpfs here (%v); it needs root (CAP_SYS_ADMIN). The injected-fault tests in store and server cover the same ledger path.", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	db := filepath.Join(dir, "svcgw.db")
	key := setupLoadAccount(t, db)

	// Leave the database a little room, so it fills after a few hundred
	// calls; the filler is what frees it again.
	var fs unix.Statfs_t
	is.NoErr(unix.Statfs(dir, &fs))
	free := int64(fs.Bavail) * int64(fs.Bsize)
	filler := filepath.Join(dir, "filler")
	is.NoErr(os.WriteFile(filler, make([]byte, free-384<<10), 0o644))
	admin := freeAddr(t)
	srv := startServer(t, db, "--fixture-ttft", "1ms", "--admin-addr", admin)

	var (
		mu       sync.Mutex
		ok       = map[string]bool{}
		refused  atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		badMu    sync.Mutex
		bad      []string
		client   = &http.Client{Timeout: 30 * time.Second}
		workers  = 8
		deadline = time.Now().Add(60 * time.Second)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, retry, body, _ := call(t, client, srv.addr, key)
				switch {
				case status == http.StatusOK:
					mu.Lock()
					ok[generationID(t, body)] = true
					mu.Unlock()
				case status == http.StatusServiceUnavailable && retry == "5":
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
				default:
					badMu.Lock()
					bad = append(bad, string(body))
					badMu.Unlock()
				}
			}
		}()
	}
	for refused.Load() < 50 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	is.Equal(len(bad), 0) // only 200s and 503s
	if refused.Load() < 50 {
		t.Fatalf("the disk never filled: %d answered, %d refused: %s", len(ok), refused.Load(), srv.stderr.String())
	}
	status, body := readyz(t, srv.addr)
	is.Equal(status, http.StatusServiceUnavailable)
	t.Logf("answered %d, refused %d; readyz: %s", len(ok), refused.Load(), body)
	is.True(strings.Contains(body, `"ledger":"unavailable"`)) // callers are told the ledger is down
	is.True(!strings.Contains(body, "disk is full"))          // not why
	_, body = readyz(t, admin)
	is.True(strings.Contains(body, "disk is full")) // the admin listener says why
	status, _, _, _ = call(t, client, srv.addr, key)
	is.Equal(status, http.StatusServiceUnavailable) // still refusing

	is.NoErr(os.Remove(filler)) // room again
	waitReady(t, srv.addr, http.StatusOK, 15*time.Second)
	for range 5 {
		status, _, body, _ := call(t, client, srv.addr, key)
		is.Equal(status, http.StatusOK)
		ok[generationID(t, body)] = true
	}
	srv.stop(t)

	ids := ledgerCheck(t, db) // balance = credits − Σ costs; spend_daily agrees
	for id := range ok {
		if !ids[id] {
			t.Errorf("200 %s has no generation row", id)
		}
	}
	is.Equal(len(ids), len(ok)) // every answered call recorded, once
	logs := srv.stderr.String()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "ledger") {
			t.Logf("log: %s", l)
		}
	}
	is.Equal(strings.Count(logs, "ledger cannot record generations"), 1) // said once
	is.Equal(strings.Count(logs, "ledger recovered"), 1)
	is.True(!strings.Contains(logs, "dropped"))
}
