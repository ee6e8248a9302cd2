//go:build bench

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Histogram range: 1 µs to 5 minutes, 3 significant digits.
const (
	histMin    = 1
	histMax    = int64(5 * time.Minute / time.Microsecond)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

func quantiles(h *hdrhistogram.Histogram) Quantiles {
	us := func(v int64) float64 { return float64(v) / 1000 }
	return Quantiles{
		P50: us(h.ValueAtPercentile(50)), P90: us(h.ValueAtPercentile(90)), P99: us(h.ValueAtPercentile(99)),
		Max: us(h.Max()), Mean: h.Mean() / 1000,
	}
}

// streamStats gathers what the streaming scenarios measure.
type streamStats struct {
	mu       sync.Mutex
	ttft     *hdrhistogram.Histogram // µs from sending the call to the first content token
	total    *hdrhistogram.Histogram // µs from sending the call to [DONE]
	requests int64
	ok       int64
	codes    map[string]int
	errs     map[string]struct{}
}

func newStreamStats() *streamStats {
	return &streamStats{ttft: newHist(), total: newHist(), codes: map[string]int{}, errs: map[string]struct{}{}}
}

func (s *streamStats) add(o streamOutcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.codes[fmt.Sprint(o.code)]++
	if o.err != nil {
		s.errs[o.err.Error()] = struct{}{}
		return
	}
	s.ok++
	_ = s.ttft.RecordValue(o.ttft.Microseconds())
	_ = s.total.RecordValue(o.total.Microseconds())
}

func (s *streamStats) fill(r *Result, elapsed time.Duration) {
	r.DurationSec = elapsed.Seconds()
	r.Requests = s.requests
	r.OK = s.ok
	if s.requests > 0 {
		r.SuccessPct = 100 * float64(s.ok) / float64(s.requests)
	}
	r.Rate = float64(s.requests) / elapsed.Seconds()
	r.Throughput = float64(s.ok) / elapsed.Seconds()
	r.Latency = quantiles(s.total)
	q := quantiles(s.ttft)
	r.TTFT = &q
	r.StatusCodes = s.codes
	errs := make([]string, 0, len(s.errs))
	for e := range s.errs {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	r.Errors = firstErrors(errs, 5)
}

// streamOutcome is one streamed call.
type streamOutcome struct {
	code  int
	ttft  time.Duration
	total time.Duration
	err   error
}

// streamClient returns an HTTP client for n concurrent streams.
func streamClient(n int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        n,
		MaxIdleConnsPerHost: n,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// chatChunk is the part of a chat-completions stream chunk the driver reads.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

var errNoDone = errors.New("stream ended without data: [DONE]")

// stream makes one streamed chat-completions call and reads it to the end.
// opened is called once the response headers arrive (the stream is open)
// and closed when it ends.
func stream(ctx context.Context, client *http.Client, ep endpoint, opened, closed func()) (o streamOutcome) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, strings.NewReader(ep.body))
	if err != nil {
		o.err = err
		return o
	}
	req.Header = ep.header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	o.code = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		o.err = fmt.Errorf("status %d", resp.StatusCode)
		return o
	}
	if opened != nil {
		opened()
		defer closed()
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	gotToken, gotDone := false, false
	for {
		line, err := br.ReadSlice('\n')
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = bytes.TrimSpace(data)
			switch {
			case bytes.Equal(data, []byte("[DONE]")):
				gotDone = true
			case !gotToken:
				var ch chatChunk
				if jerr := json.Unmarshal(data, &ch); jerr != nil {
					o.err = fmt.Errorf("decode chunk: %w", jerr)
					return o
				}
				if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
					gotToken = true
					o.ttft = time.Since(start)
				}
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: no frame of ours is; skip it.
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			o.err = err
			return o
		}
	}
	o.total = time.Since(start)
	switch {
	case !gotToken:
		o.err = errors.New("stream carried no content token")
	case !gotDone:
		o.err = errNoDone
	}
	return o
}

// runStream keeps -connections streamed calls in flight for -duration and
// reports streams per second and time to first token.
func runStream(c config) (*Result, error) {
	r := &Result{Target: c.target, Scenario: c.scenario, Detail: fmt.Sprintf("closed loop, %d streams in flight, %s", c.connections, c.duration)}
	ep := c.chatEndpoint(true)
	client := streamClient(c.connections)

	loop := func(d time.Duration, st *streamStats) time.Duration {
		deadline := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < c.connections; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
					st.add(stream(ctx, client, ep, nil, nil))
					cancel()
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	return measureStreams(c, r, loop)
}

// runStreamRate starts -rate streamed calls per second (open loop, paced by
// vegeta's constant pacer) for -duration. Below saturation, time to first
// token is the target's own latency rather than queueing behind the other
// streams, so this is where added time to first token is read.
func runStreamRate(c config) (*Result, error) {
	r := &Result{Target: c.target, Scenario: c.scenario, Detail: fmt.Sprintf("%d streams/s for %s", c.rate, c.duration)}
	ep := c.chatEndpoint(true)
	client := streamClient(1024)
	pacer := vegeta.ConstantPacer{Freq: c.rate, Per: time.Second}

	loop := func(d time.Duration, st *streamStats) time.Duration {
		start := time.Now()
		var (
			wg   sync.WaitGroup
			hits uint64
		)
		for {
			elapsed := time.Since(start)
			if elapsed >= d {
				break
			}
			wait, stop := pacer.Pace(elapsed, hits)
			if stop {
				break
			}
			time.Sleep(wait)
			hits++
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
				defer cancel()
				st.add(stream(ctx, client, ep, nil, nil))
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	return measureStreams(c, r, loop)
}

// measureStreams runs loop for the warm-up (unmeasured) and then for the
// measured phase, watching the target's CPU and RSS, and fills r.
func measureStreams(c config, r *Result, loop func(time.Duration, *streamStats) time.Duration) (*Result, error) {
	if c.warmup > 0 {
		wst := newStreamStats()
		loop(c.warmup, wst)
		r.OKTotal += wst.ok
	}
	w, err := startWatch(c.pid)
	if err != nil {
		return nil, err
	}
	prof := startProfile(c)
	st := newStreamStats()
	elapsed := loop(c.duration, st)
	if err := w.stop(r, st.requests); err != nil {
		return nil, err
	}
	r.CPUProfile = prof.wait()
	r.OKTotal += st.ok
	st.fill(r, elapsed)
	return r, nil
}

// runHold opens -streams streamed calls at once and keeps them open for as
// long as the mock takes to finish them (its shape must be slow: see
// run.sh), sampling the target's RSS all along.
func runHold(c config) (*Result, error) {
	r := &Result{Target: c.target, Scenario: c.scenario, Detail: fmt.Sprintf("%d streams opened at once", c.streams)}
	ep := c.chatEndpoint(true)
	client := streamClient(c.streams)

	w, err := startWatch(c.pid)
	if err != nil {
		return nil, err
	}
	var open, maxOpen atomic.Int64
	opened := func() {
		n := open.Add(1)
		for {
			m := maxOpen.Load()
			if n <= m || maxOpen.CompareAndSwap(m, n) {
				return
			}
		}
	}
	closed := func() { open.Add(-1) }

	st := newStreamStats()
	ctx, cancel := context.WithTimeout(context.Background(), c.holdTimeout)
	defer cancel()
	heap := heapWhenOpen(ctx, c, &open)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < c.streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.add(stream(ctx, client, ep, opened, closed))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := w.stop(r, st.requests); err != nil {
		return nil, err
	}
	<-heap
	r.OKTotal = st.ok
	r.MaxOpen = maxOpen.Load()
	st.fill(r, elapsed)
	return r, nil
}

// heapWhenOpen fetches a heap profile of the target (its pprof listener,
// -cpuprofile-url) into -heapprofile-out once all -streams are open, and
// closes the channel it returns when done (at once without those flags).
func heapWhenOpen(ctx context.Context, c config, open *atomic.Int64) <-chan struct{} {
	done := make(chan struct{})
	if c.profileURL == "" || c.heapOut == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for open.Load() < int64(c.streams) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		u := strings.TrimSuffix(c.profileURL, "/") + "/debug/pprof/heap?gc=1"
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "load: heap profile:", err)
			return
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, "load: heap profile:", resp.Status, err)
			return
		}
		if err := os.WriteFile(c.heapOut, raw, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "load: heap profile:", err)
		}
	}()
	return done
}
