//go:build bench

// Command svcgwprof is svcgw with net/http/pprof on a second listener, for
// profiling under the benchmark's load (bench/run.sh with BENCH_PROFILE=1).
// It runs exactly svcgw's command line (cli.Run), so it serves the same
// code; BENCH_PPROF_ADDR names the profiling listener (127.0.0.1:0 if
// unset; the address is logged on stderr and written to
// BENCH_PPROF_ADDR_FILE when set).
//
// This is the one bench program that imports svcgw (cli, as main does). It
// is in the bench module (bench/go.mod), so go list ./... and the
// architecture test never see it.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/svcgw/svcgw/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	addr := os.Getenv("BENCH_PPROF_ADDR")
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "svcgwprof:", err)
		os.Exit(1)
	}
	if f := os.Getenv("BENCH_PPROF_ADDR_FILE"); f != "" {
		_ = os.WriteFile(f, []byte(ln.Addr().String()), 0o644)
	}
	fmt.Fprintf(os.Stderr, "svcgwprof: pprof on http://%s/debug/pprof/\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()

	// svcgw serve turns memory profiling off when it has no admin
	// listener, unless GODEBUG names a rate: this program serves the
	// heap profile itself, so it names the rate the runtime runs at.
	if g := os.Getenv("GODEBUG"); !strings.Contains(g, "memprofilerate=") {
		_ = os.Setenv("GODEBUG", strings.TrimPrefix(g+",memprofilerate="+strconv.Itoa(runtime.MemProfileRate), ","))
	}
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
