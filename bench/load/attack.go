//go:build bench

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// runAttack runs a non-streaming scenario: max, messages, gencontent and embeddings
// keep -connections calls in flight (closed loop, as fast as the target
// answers) with the driver of closed.go, or with vegeta for max-vegeta;
// rate sends -rate calls per second whatever the target does (open loop,
// vegeta's constant pacer).
func runAttack(c config) (*Result, error) {
	r := &Result{Target: c.target, Scenario: c.scenario}
	var ep endpoint
	switch c.scenario {
	case "messages", "gencontent":
		if !c.svcgw() {
			return nil, fmt.Errorf("the %s surface is svcgw's only", c.scenario)
		}
		ep = c.surfaceEndpoint(c.scenario, false)
		// One plain and one streamed call first, checked for the surface's
		// own shape: throughput of wrong answers would mean nothing.
		n, err := checkSurface(c, c.scenario)
		r.OKTotal += n
		if err != nil {
			return nil, err
		}
	case "embeddings":
		if c.embedInputs < 1 {
			return nil, fmt.Errorf("-embed-inputs must be at least 1")
		}
		if c.embedFormat != "float" && c.embedFormat != "base64" {
			return nil, fmt.Errorf("-embed-format must be float or base64")
		}
		ep = c.embeddingsEndpoint(c.embedInputs)
		// One call first, checked: a vector per text, of the mock's size.
		n, err := checkEmbeddings(c, ep)
		r.OKTotal += n
		if err != nil {
			return nil, err
		}
	default:
		ep = c.chatEndpoint(false)
	}
	if c.scenario != "rate" && c.scenario != "max-vegeta" {
		return closedAttack(c, r, ep)
	}
	tgt := vegeta.Target{Method: http.MethodPost, URL: ep.url, Body: []byte(ep.body), Header: ep.header}

	attacker := func() *vegeta.Attacker {
		opts := []func(*vegeta.Attacker){vegeta.Timeout(c.timeout), vegeta.KeepAlive(true), vegeta.Redirects(vegeta.NoFollow)}
		if c.scenario == "rate" {
			// Open loop: vegeta adds workers whenever all are busy, and
			// each may hold a connection.
			opts = append(opts, vegeta.Connections(10000))
		} else {
			n := uint64(c.connections)
			opts = append(opts, vegeta.Workers(n), vegeta.MaxWorkers(n), vegeta.Connections(c.connections), vegeta.MaxConnections(c.connections))
		}
		return vegeta.NewAttacker(opts...)
	}
	pacer := vegeta.Rate{Freq: 0, Per: time.Second} // as fast as the workers go
	r.Detail = fmt.Sprintf("closed loop, %d connections, %s (vegeta)", c.connections, c.duration)
	if c.scenario == "rate" {
		pacer = vegeta.Rate{Freq: c.rate, Per: time.Second}
		r.Detail = fmt.Sprintf("%d req/s for %s", c.rate, c.duration)
	}

	// Warm-up: connections open, pools filled, caches hot. It runs on its
	// own attacker and is not measured, but its calls count towards the
	// generation records.
	if c.warmup > 0 {
		var wm vegeta.Metrics
		for res := range attacker().Attack(vegeta.NewStaticTargeter(tgt), pacer, c.warmup, "warmup") {
			wm.Add(res)
			if ok(res) {
				r.OKTotal++
			}
		}
		wm.Close()
	}

	w, err := startWatch(c.pid)
	if err != nil {
		return nil, err
	}
	prof := startProfile(c)
	var m vegeta.Metrics
	for res := range attacker().Attack(vegeta.NewStaticTargeter(tgt), pacer, c.duration, c.scenario) {
		m.Add(res)
		if ok(res) {
			r.OKTotal++
		}
	}
	m.Close()
	if err := w.stop(r, int64(m.Requests)); err != nil {
		return nil, err
	}
	r.CPUProfile = prof.wait()

	r.DurationSec = m.Duration.Seconds()
	r.Requests = int64(m.Requests)
	r.OK = int64(math.Round(m.Success * float64(m.Requests)))
	r.SuccessPct = 100 * m.Success
	r.Rate = m.Rate
	r.Throughput = m.Throughput
	r.Latency = Quantiles{
		P50: ms(m.Latencies.P50), P90: ms(m.Latencies.P90), P99: ms(m.Latencies.P99),
		Max: ms(m.Latencies.Max), Mean: ms(m.Latencies.Mean),
	}
	r.StatusCodes = m.StatusCodes
	r.Errors = firstErrors(m.Errors, 5)
	return r, nil
}

// closedAttack runs a closed-loop scenario with the driver of closed.go:
// a warm-up, then the measured phase, watching the target.
func closedAttack(c config, r *Result, ep endpoint) (*Result, error) {
	r.Detail = fmt.Sprintf("closed loop, %d connections, %s", c.connections, c.duration)
	if c.scenario == "embeddings" {
		r.Detail += fmt.Sprintf(", %d texts a call, encoding_format %s", c.embedInputs, c.embedFormat)
	}
	var okTotal atomic.Int64
	if c.warmup > 0 {
		if _, _, err := runClosed(c, ep, c.warmup, &okTotal); err != nil {
			return nil, err
		}
	}
	w, err := startWatch(c.pid)
	if err != nil {
		return nil, err
	}
	prof := startProfile(c)
	st, elapsed, err := runClosed(c, ep, c.duration, &okTotal)
	if err != nil {
		return nil, err
	}
	if err := w.stop(r, st.requests); err != nil {
		return nil, err
	}
	r.CPUProfile = prof.wait()
	r.OKTotal += okTotal.Load()
	r.DurationSec = elapsed.Seconds()
	r.Requests = st.requests
	r.OK = st.ok
	if st.requests > 0 {
		r.SuccessPct = 100 * float64(st.ok) / float64(st.requests)
	}
	r.Rate = float64(st.requests) / elapsed.Seconds()
	r.Throughput = float64(st.ok) / elapsed.Seconds()
	r.Latency = quantiles(st.hist)
	r.StatusCodes = map[string]int{}
	for code, n := range st.codes {
		r.StatusCodes[strconv.Itoa(code)] = n
	}
	errs := make([]string, 0, len(st.errs))
	for e := range st.errs {
		errs = append(errs, e)
	}
	r.Errors = firstErrors(errs, 5)
	return r, nil
}

// ok reports whether vegeta's result is a successful call; vegeta itself
// counts 3xx as success too, and none is expected here.
func ok(res *vegeta.Result) bool { return res.Code >= 200 && res.Code < 300 }

func firstErrors(errs []string, n int) []string {
	sort.Strings(errs)
	if len(errs) > n {
		errs = append(errs[:n:n], fmt.Sprintf("… and %d more", len(errs)-n))
	}
	return errs
}

// checkSurface makes one plain and one streamed call on a svcgw surface
// and checks each answer carries text in the surface's own shape. It
// returns how many calls succeeded.
func checkSurface(c config, surface string) (int64, error) {
	client := &http.Client{Timeout: c.timeout}
	var n int64
	for _, stream := range []bool{false, true} {
		ep := c.surfaceEndpoint(surface, stream)
		req, err := http.NewRequest(http.MethodPost, ep.url, strings.NewReader(ep.body))
		if err != nil {
			return n, err
		}
		req.Header = ep.header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return n, err
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return n, err
		}
		if resp.StatusCode != http.StatusOK {
			return n, fmt.Errorf("%s check (stream %v): status %d: %.300s", surface, stream, resp.StatusCode, raw)
		}
		n++
		var text string
		if stream {
			text, err = surfaceStreamText(surface, raw)
		} else {
			text, err = surfaceText(surface, raw)
		}
		if err != nil {
			return n, fmt.Errorf("%s check (stream %v): %w: %.300s", surface, stream, err, raw)
		}
		if text == "" {
			return n, fmt.Errorf("%s check (stream %v): no text in the answer: %.300s", surface, stream, raw)
		}
	}
	return n, nil
}

// checkEmbeddings sends ep once and checks the answer is OpenAI's
// embeddings reply with one vector per text, all of one size, in the
// form asked (-embed-format).
func checkEmbeddings(c config, ep endpoint) (int64, error) {
	req, err := http.NewRequest(http.MethodPost, ep.url, strings.NewReader(ep.body))
	if err != nil {
		return 0, err
	}
	req.Header = ep.header.Clone()
	resp, err := (&http.Client{Timeout: c.timeout}).Do(req)
	if err != nil {
		return 0, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("embeddings check: status %d: %.300s", resp.StatusCode, raw)
	}
	var r struct {
		Object string `json:"object"`
		Data   []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return 1, fmt.Errorf("embeddings check: %w: %.300s", err, raw)
	}
	if r.Object != "list" || len(r.Data) != c.embedInputs {
		return 1, fmt.Errorf("embeddings check: want a list of %d vectors: %.300s", c.embedInputs, raw)
	}
	size := -1
	for _, d := range r.Data {
		var n int
		if c.embedFormat == "base64" {
			var s string
			if err := json.Unmarshal(d.Embedding, &s); err != nil {
				return 1, fmt.Errorf("embeddings check: want base64: %w", err)
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(b)%4 != 0 {
				return 1, fmt.Errorf("embeddings check: not base64 of float32s: %.100s", s)
			}
			n = len(b) / 4
		} else {
			var v []float32
			if err := json.Unmarshal(d.Embedding, &v); err != nil {
				return 1, fmt.Errorf("embeddings check: want floats: %w", err)
			}
			n = len(v)
		}
		if n == 0 || size >= 0 && n != size {
			return 1, fmt.Errorf("embeddings check: vectors of %d and %d floats", size, n)
		}
		size = n
	}
	return 1, nil
}

// anthropicMessage and geminiResponse are the parts of those answers the
// check reads.
type anthropicMessage struct {
	Type    string `json:"type"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
	} `json:"candidates"`
}

func surfaceText(surface string, raw []byte) (string, error) {
	if surface == "messages" {
		var m anthropicMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", err
		}
		if m.Type != "message" {
			return "", fmt.Errorf("type %q, want message", m.Type)
		}
		var sb strings.Builder
		for _, p := range m.Content {
			sb.WriteString(p.Text)
		}
		return sb.String(), nil
	}
	var g geminiResponse
	if err := json.Unmarshal(raw, &g); err != nil {
		return "", err
	}
	return geminiText(g), nil
}

func geminiText(g geminiResponse) string {
	var sb strings.Builder
	for _, c := range g.Candidates {
		for _, p := range c.Content.Parts {
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// surfaceStreamText reads a streamed answer event by event: messages must
// end with message_stop, generate-content frames each carry a response.
func surfaceStreamText(surface string, raw []byte) (string, error) {
	var (
		sb      strings.Builder
		stopped bool
	)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, found := strings.CutPrefix(sc.Text(), "data:")
		if !found {
			continue
		}
		data = strings.TrimSpace(data)
		if surface == "messages" {
			var ev struct {
				Type  string `json:"type"`
				Delta struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"delta"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return "", err
			}
			if ev.Type == "content_block_delta" {
				sb.WriteString(ev.Delta.Text)
			}
			if ev.Type == "message_stop" {
				stopped = true
			}
			continue
		}
		var g geminiResponse
		if err := json.Unmarshal([]byte(data), &g); err != nil {
			return "", err
		}
		sb.WriteString(geminiText(g))
		stopped = true
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if !stopped {
		return "", fmt.Errorf("stream did not finish")
	}
	return sb.String(), nil
}

// profile is a CPU profile (and, with -trace-out, an execution trace)
// being fetched from the target's pprof listener over the measured phase.
type profile struct {
	done  chan string
	trace chan struct{}
}

func startProfile(c config) *profile {
	p := &profile{done: make(chan string, 1), trace: make(chan struct{})}
	secs := int(math.Max(1, math.Floor(c.duration.Seconds())))
	if c.profileURL == "" || c.traceOut == "" {
		close(p.trace)
	} else {
		go func() {
			defer close(p.trace)
			fetchProfile(c, fmt.Sprintf("trace?seconds=%d", secs), c.traceOut)
		}()
	}
	if c.profileURL == "" || c.profileOut == "" {
		p.done <- ""
		return p
	}
	go func() {
		p.done <- fetchProfile(c, fmt.Sprintf("profile?seconds=%d", secs), c.profileOut)
	}()
	return p
}

// fetchProfile writes what the target's /debug/pprof/<what> answers to out,
// and returns out ("" when it failed, which is reported on stderr).
func fetchProfile(c config, what, out string) string {
	ctx, cancel := context.WithTimeout(context.Background(), c.duration+30*time.Second)
	defer cancel()
	u := strings.TrimSuffix(c.profileURL, "/") + "/debug/pprof/" + what
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", what, err)
		return ""
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "load:", what, resp.Status, err)
		return ""
	}
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "load:", what, err)
		return ""
	}
	return out
}

func (p *profile) wait() string {
	<-p.trace
	return <-p.done
}
