//go:build bench

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The closed-loop driver of (a) and (e): wrk's way of loading a server,
// written for this benchmark. Each of -connections goroutines owns one
// keep-alive connection and sends the next call as soon as the last one's
// body has been read; the request is rendered once, and a response is
// parsed only as far as HTTP/1.1 framing needs (status line, headers,
// Content-Length or chunked body). vegeta, which drove (a) before, builds
// an http.Request, goes through net/http's client and reports each call
// on a channel: on the benchmark's one driver core it capped the bare
// proxy at about two thirds of what wrk measures, which flattered the
// svcgw/proxy ratio. This driver does what wrk does and stays in Go, so
// the benchmark needs nothing installed; bench/RESULTS.md compares the
// three drivers.

// closedStats is one connection's figures; they are merged at the end.
type closedStats struct {
	hist     *hdrhistogram.Histogram // µs per call
	requests int64
	ok       int64
	codes    map[int]int
	errs     map[string]struct{}
}

// runClosed keeps c.connections calls of ep in flight for d and returns the
// merged figures and the elapsed time. okTotal counts successful calls as
// they happen (the generation-record check counts warm-ups too).
func runClosed(c config, ep endpoint, d time.Duration, okTotal *atomic.Int64) (*closedStats, time.Duration, error) {
	u, err := url.Parse(ep.url)
	if err != nil {
		return nil, 0, err
	}
	req := renderRequest(u, ep)
	deadline := time.Now().Add(d)
	start := time.Now()
	stats := make([]*closedStats, c.connections)
	var wg sync.WaitGroup
	for i := range stats {
		st := &closedStats{hist: newHist(), codes: map[int]int{}, errs: map[string]struct{}{}}
		stats[i] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			closedLoop(u.Host, req, c.timeout, deadline, st, okTotal)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := &closedStats{hist: newHist(), codes: map[int]int{}, errs: map[string]struct{}{}}
	for _, st := range stats {
		all.hist.Merge(st.hist)
		all.requests += st.requests
		all.ok += st.ok
		for k, v := range st.codes {
			all.codes[k] += v
		}
		for e := range st.errs {
			all.errs[e] = struct{}{}
		}
	}
	return all, elapsed, nil
}

// renderRequest is the request's bytes as they go on the wire.
func renderRequest(u *url.URL, ep endpoint) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	h := ep.header.Clone()
	h.Set("Content-Length", strconv.Itoa(len(ep.body)))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	b.WriteString(ep.body)
	return b.Bytes()
}

// closedLoop is one connection's loop: call, read the whole response,
// again, until the deadline. A failed call closes the connection and the
// next one dials anew.
func closedLoop(host string, req []byte, timeout time.Duration, deadline time.Time, st *closedStats, okTotal *atomic.Int64) {
	var (
		conn net.Conn
		br   *bufio.Reader
		// The connection's deadline is moved on only once half the
		// timeout has passed (moving it costs a timer update per call),
		// so a call times out after between half and all of timeout.
		renew time.Time
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for time.Now().Before(deadline) {
		t0 := time.Now()
		if conn == nil {
			var err error
			conn, err = net.DialTimeout("tcp", host, timeout)
			if err != nil {
				st.fail(err)
				time.Sleep(10 * time.Millisecond) // not a busy loop against a target that is down
				continue
			}
			renew = time.Time{}
			if br == nil {
				br = bufio.NewReaderSize(conn, 32<<10)
			} else {
				br.Reset(conn)
			}
		}
		if t0.After(renew) {
			_ = conn.SetDeadline(t0.Add(timeout))
			renew = t0.Add(timeout / 2)
		}
		code, keep, err := roundTrip(conn, br, req)
		st.requests++
		if err != nil {
			st.fail(err)
			conn.Close()
			conn = nil
			continue
		}
		st.codes[code]++
		if code >= 200 && code < 300 {
			st.ok++
			okTotal.Add(1)
			_ = st.hist.RecordValue(time.Since(t0).Microseconds())
		}
		if !keep {
			conn.Close()
			conn = nil
		}
	}
}

func (st *closedStats) fail(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = errors.New("timeout")
	}
	if len(st.errs) < 16 {
		st.errs[err.Error()] = struct{}{}
	}
}

// roundTrip writes req and reads one response to its end. It returns the
// status and whether the connection may be used again.
func roundTrip(conn net.Conn, br *bufio.Reader, req []byte) (code int, keep bool, err error) {
	if _, err := conn.Write(req); err != nil {
		return 0, false, err
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	code, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("bad header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			if asciiEqualFold(value, "close") {
				keep = false
			}
		}
	}
	switch {
	case code == http.StatusNoContent || code == http.StatusNotModified || code/100 == 1:
	case chunked:
		err = skipChunked(br)
	case length >= 0:
		_, err = br.Discard(int(length))
	default:
		_, err = io.Copy(io.Discard, br) // to EOF
		keep = false
	}
	return code, keep, err
}

// skipChunked reads a chunked body and its trailers.
func skipChunked(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailers, then the blank line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(n) + 2); err != nil { // data and CRLF
			return err
		}
	}
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
