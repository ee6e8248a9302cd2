//go:build bench

// Command load is the benchmark's load driver (bench/README.md). It runs one
// scenario against one target and writes the figures as JSON:
//
//	load run -scenario max|max-vegeta|rate|stream|streamrate|hold|messages|gencontent \
//	    -target direct|proxy|floor|svcgw -base http://127.0.0.1:PORT [-key K] [-pid PID] -out FILE
//	load report [-usage-json FILE | -gen-count N] [-db-locked N] FILE...
//
// Closed-loop non-streaming scenarios are driven by closed.go (wrk's way:
// one raw keep-alive connection per worker), max-vegeta and the constant
// rate by vegeta's attacker and summarised by its Metrics (t-digest
// quantiles); latencies of the others, time to first token and stream
// duration go into HDR histograms. With -pid the target
// process's CPU time (/proc/PID/stat) and peak RSS (VmHWM, reset at the
// start of the scenario) are measured over the measured phase only.
//
// It is a bench tool, not part of svcgw: it imports nothing of the module.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// Result is one scenario's figures against one target.
type Result struct {
	Target   string `json:"target"`   // direct, proxy, floor, svcgw (or the -name given)
	Scenario string `json:"scenario"` // max, rate, stream, streamrate, hold, messages, gencontent
	Detail   string `json:"detail"`   // the load shape, for the report

	DurationSec float64        `json:"duration_sec"` // measured phase
	Requests    int64          `json:"requests"`     // calls in the measured phase
	OK          int64          `json:"ok"`           // of those, successful
	SuccessPct  float64        `json:"success_pct"`
	Rate        float64        `json:"rate"`       // calls sent per second
	Throughput  float64        `json:"throughput"` // successful calls (or streams) per second
	Latency     Quantiles      `json:"latency"`    // whole call (stream: until [DONE])
	TTFT        *Quantiles     `json:"ttft,omitempty"`
	MaxOpen     int64          `json:"max_open,omitempty"` // hold: streams open at once, at most
	StatusCodes map[string]int `json:"status_codes,omitempty"`
	Errors      []string       `json:"errors,omitempty"` // distinct, first few

	// OKTotal counts every successful call this run made, warm-up and
	// checks included: each one must have left a generation record.
	OKTotal int64 `json:"ok_total"`

	CPUSeconds        float64 `json:"cpu_seconds,omitempty"`
	CPUPerCallMicros  float64 `json:"cpu_per_call_us,omitempty"`
	PeakRSSMiB        float64 `json:"peak_rss_mib,omitempty"`
	PeakRSSIsLifetime bool    `json:"peak_rss_is_lifetime,omitempty"` // VmHWM could not be reset
	MaxSampledRSSMiB  float64 `json:"max_sampled_rss_mib,omitempty"`
	// The largest sample's anonymous (heap, stacks) and file-backed (the
	// binary's pages) parts, and VmRSS when the scenario started: hold's
	// per-stream cost is (max sampled − start) / streams open.
	MaxSampledAnonMiB float64 `json:"max_sampled_anon_mib,omitempty"`
	MaxSampledFileMiB float64 `json:"max_sampled_file_mib,omitempty"`
	StartRSSMiB       float64 `json:"start_rss_mib,omitempty"`
	CPUProfile        string  `json:"cpu_profile,omitempty"`

	// The target's share of its core and everything else's: on a shared
	// machine, a high OthersOnCorePct explains a bad figure.
	TargetCore      int     `json:"target_core"` // -1: not pinned to one core
	TargetCPUPct    float64 `json:"target_cpu_pct,omitempty"`
	CoreBusyPct     float64 `json:"core_busy_pct,omitempty"`
	OthersOnCorePct float64 `json:"others_on_core_pct,omitempty"`
}

// Quantiles are latencies in milliseconds.
type Quantiles struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// config is the run subcommand's flags.
type config struct {
	scenario, target, base, key, out string
	name                             string // recorded as the result's target; default target
	pid                              int
	duration, warmup, timeout        time.Duration
	connections, rate, streams       int
	embedInputs                      int
	embedFormat                      string
	holdTimeout                      time.Duration
	profileURL, profileOut, heapOut  string
	traceOut                         string
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:], os.Stdout)
	case "ports":
		err = portsCmd(os.Args[2:], os.Stdout)
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return
	default:
		usage(os.Stderr)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: load run -scenario S -target T -base URL [flags] -out FILE")
	fmt.Fprintln(w, "       load report [-usage-json FILE | -gen-count N] [-db-locked N] FILE...")
	fmt.Fprintln(w, "       load ports N   (N loopback ports free now, on one line)")
	fmt.Fprintln(w, "run 'load run -h' for the run flags")
}

func runCmd(args []string) error {
	var c config
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&c.scenario, "scenario", "max", "max (closed loop at -connections, closed.go's driver), max-vegeta (the same, driven by vegeta), rate (constant -rate), stream (streaming closed loop at -connections), streamrate (-rate streams per second), hold (-streams open at once), messages or gencontent (svcgw surfaces, closed loop), embeddings (OpenAI embeddings of -embed-inputs texts, closed loop)")
	fs.StringVar(&c.target, "target", "direct", "direct, proxy, floor, floor-copy, svcgw or svcgw-h2c (svcgw paths are under /svc and need -key; floor needs one of its -key)")
	fs.StringVar(&c.base, "base", "", "target base URL, e.g. http://127.0.0.1:8080")
	fs.StringVar(&c.key, "key", "", "API key (svcgw)")
	fs.IntVar(&c.pid, "pid", 0, "target process id, for CPU time and peak RSS (0: not measured)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured phase")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up before it (same load)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "per-call timeout")
	fs.IntVar(&c.connections, "connections", 50, "connections (closed-loop scenarios)")
	fs.IntVar(&c.rate, "rate", 2000, "calls per second (rate, streamrate)")
	fs.IntVar(&c.streams, "streams", 1000, "streams held open at once (hold)")
	fs.IntVar(&c.embedInputs, "embed-inputs", 8, "texts per embeddings call (embeddings)")
	fs.StringVar(&c.embedFormat, "embed-format", "float", "encoding_format of each embeddings call: float, or base64 (the official OpenAI SDKs' default)")
	fs.DurationVar(&c.holdTimeout, "hold-timeout", 60*time.Second, "hold: give up on streams after this long")
	fs.StringVar(&c.profileURL, "cpuprofile-url", "", "pprof base URL of the target (svcgwprof); a CPU profile of the measured phase is fetched from it")
	fs.StringVar(&c.profileOut, "cpuprofile-out", "", "where to write that profile")
	fs.StringVar(&c.traceOut, "trace-out", "", "where to write an execution trace of the measured phase, fetched from -cpuprofile-url alongside the CPU profile")
	fs.StringVar(&c.heapOut, "heapprofile-out", "", "hold: where to write a heap profile fetched from -cpuprofile-url once every stream is open")
	fs.StringVar(&c.out, "out", "", "write the result JSON here (default stdout)")
	fs.StringVar(&c.name, "name", "", "the target's name in the result (default -target): two processes of one kind, such as svcgw with and without metrics, side by side")
	selfProfile := fs.String("self-cpuprofile", "", "write a CPU profile of the driver itself here (is it fast enough?)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.base == "" {
		return fmt.Errorf("-base is required")
	}
	if c.svcgw() && c.key == "" {
		return fmt.Errorf("-key is required for svcgw")
	}
	if *selfProfile != "" {
		f, err := os.Create(*selfProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var (
		r   *Result
		err error
	)
	switch c.scenario {
	case "max", "max-vegeta", "rate", "messages", "gencontent", "embeddings":
		r, err = runAttack(c)
	case "stream":
		r, err = runStream(c)
	case "streamrate":
		r, err = runStreamRate(c)
	case "hold":
		r, err = runHold(c)
	default:
		return fmt.Errorf("unknown scenario %q", c.scenario)
	}
	if err != nil {
		return fmt.Errorf("%s against %s: %w", c.scenario, c.target, err)
	}
	if c.name != "" {
		r.Target = c.name
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "load: %-6s %-10s %s\n", r.Target, r.Scenario, summary(r))
	if c.out == "" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(c.out, append(b, '\n'), 0o644)
}

func summary(r *Result) string {
	s := fmt.Sprintf("%d calls, %.2f%% ok, %.0f/s, p50 %.3f ms, p99 %.3f ms", r.Requests, r.SuccessPct, r.Throughput, r.Latency.P50, r.Latency.P99)
	if r.TTFT != nil {
		s += fmt.Sprintf(", ttft p50 %.3f ms p99 %.3f ms", r.TTFT.P50, r.TTFT.P99)
	}
	if r.MaxOpen > 0 {
		s += fmt.Sprintf(", %d open at once", r.MaxOpen)
	}
	if r.PeakRSSMiB > 0 {
		s += fmt.Sprintf(", cpu %.1f µs/call, peak rss %.1f MiB", r.CPUPerCallMicros, r.PeakRSSMiB)
	}
	if len(r.Errors) > 0 {
		s += fmt.Sprintf(", errors: %q", r.Errors)
	}
	return s
}

// The prompt every scenario sends. The model is svcgw's own id; the mock
// ignores it.
const (
	prompt    = "Say hello in five words."
	chatBody  = `{"model":"svc-fusion","messages":[{"role":"user","content":"` + prompt + `"}],"max_tokens":64}`
	chatSSE   = `{"model":"svc-fusion","messages":[{"role":"user","content":"` + prompt + `"}],"max_tokens":64,"stream":true,"stream_options":{"include_usage":true}}`
	msgsBody  = `{"model":"svc-fusion","max_tokens":64,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	msgsSSE   = `{"model":"svc-fusion","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	geminiReq = `{"contents":[{"role":"user","parts":[{"text":"` + prompt + `"}]}],"generationConfig":{"maxOutputTokens":64}}`
)

// svcgw reports whether the target is an svcgw: svcgw, or svcgw-h2c (the
// same, reaching the mock over h2c).
func (c config) svcgw() bool { return strings.HasPrefix(c.target, "svcgw") }

// endpoint is one call: where it goes and how it authenticates.
type endpoint struct {
	url    string
	body   string
	header http.Header
}

// chatEndpoint is the chat-completions call of a target.
func (c config) chatEndpoint(stream bool) endpoint {
	prefix := ""
	if c.svcgw() {
		prefix = "/svc"
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	} else {
		h.Set("Authorization", "Bearer bench")
	}
	body := chatBody
	if stream {
		body = chatSSE
		h.Set("Accept", "text/event-stream")
	}
	return endpoint{url: c.base + prefix + "/v1/chat/completions", body: body, header: h}
}

// embedText is one text of an embeddings call: a passage of a document,
// as a retrieval application embeds them (about 60 tokens).
const embedText = "Photosynthesis is the process by which green plants, algae and some bacteria turn light energy into chemical energy, storing it in sugars made from carbon dioxide and water; chapter "

// embeddingsEndpoint is an OpenAI embeddings call of n texts (distinct,
// so that nothing could be cached), asking for -embed-format.
func (c config) embeddingsEndpoint(n int) endpoint {
	ep := c.chatEndpoint(false)
	ep.url = strings.TrimSuffix(ep.url, "/chat/completions") + "/embeddings"
	texts := make([]string, n)
	for i := range texts {
		texts[i] = strconv.Quote(embedText + strconv.Itoa(i+1) + ".")
	}
	ep.body = `{"model":"text-embedding-3-small","input":[` + strings.Join(texts, ",") + `],"encoding_format":"` + c.embedFormat + `"}`
	return ep
}

// surfaceEndpoint is a messages or generate-content call to svcgw.
func (c config) surfaceEndpoint(surface string, stream bool) endpoint {
	h := http.Header{"Content-Type": {"application/json"}}
	switch surface {
	case "messages":
		h.Set("X-Api-Key", c.key)
		h.Set("Anthropic-Version", "2023-06-01")
		body := msgsBody
		if stream {
			body = msgsSSE
		}
		return endpoint{url: c.base + "/svc/v1/messages", body: body, header: h}
	default:
		h.Set("X-Goog-Api-Key", c.key)
		u := c.base + "/svc/v1beta/models/svc-fusion:generateContent"
		if stream {
			u = c.base + "/svc/v1beta/models/svc-fusion:streamGenerateContent?alt=sse"
		}
		return endpoint{url: u, body: geminiReq, header: h}
	}
}

// portsCmd prints n loopback TCP ports free now, for a process that
// takes its ports in a configuration file (run.sh's Jaeger).
func portsCmd(args []string, out io.Writer) error {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil || n < 1 {
			return fmt.Errorf("ports: %q is not a count", args[0])
		}
	}
	ports := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close() // held until all are chosen, so that none repeats
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	_, err := fmt.Fprintln(out, strings.Join(ports, " "))
	return err
}
