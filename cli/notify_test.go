//go:build unix

package cli

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServe_TellsSystemdWhenReadyAndStopping: under a Type=notify unit
// (deploy/systemd/svcgw.service) systemd waits for READY=1 on
// $NOTIFY_SOCKET before it calls the start done.
func TestServe_TellsSystemdWhenReadyAndStopping(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	srv := startServer(t, newDB(t))
	next := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v; log: %s", err, srv.stderr.String())
		}
		return string(buf[:n])
	}
	if got, want := next(), "READY=1\nSTATUS=serving http://"+srv.addr; got != want {
		t.Errorf("first notification %q, want %q", got, want)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := next(); !strings.HasPrefix(got, "STOPPING=1") {
		t.Errorf("on SIGTERM %q, want STOPPING=1", got)
	}
	if err := <-srv.exited; err != nil {
		t.Errorf("serve exited with %v: %s", err, srv.stderr.String())
	}
	srv.exited <- nil // for the cleanup's wait
}
