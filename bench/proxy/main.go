//go:build bench

// Command proxy is the benchmark's floor (bench/README.md): a bare
// httputil.ReverseProxy in front of the mock upstream, with no auth,
// parsing, translation or metering. Whatever svcgw adds over it is
// svcgw's own cost. Its transport keeps as many idle upstream connections
// as svcgw's does (upstream/httpclient.go), so the two are compared on the
// same footing.
//
// It is a bench tool, not part of svcgw: it imports nothing of the module.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("proxy: ")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the bound address to this file once listening")
	target := flag.String("upstream", "http://127.0.0.1:8081", "upstream base URL (the mock)")
	flag.Parse()

	u, err := url.Parse(*target)
	if err != nil {
		log.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	// text/event-stream is flushed at once by ReverseProxy itself; nothing
	// else needs flushing early.
	rp.ErrorLog = log.New(os.Stderr, "proxy: ", 0)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("listening on %s, forwarding to %s", ln.Addr(), u)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
