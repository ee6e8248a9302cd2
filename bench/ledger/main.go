//go:build bench

// Command ledger is the ledger benchmark's driver (bench/ledger.sh,
// bench/README.md), run against a svcgw serving a database made by
// bench/seed:
//
//	ledger -base http://127.0.0.1:8080 -secrets keys.txt -sample ids.txt \
//	    -end 2026-11-23T00:00:00Z -out ledger.json
//
// It measures, over HTTP, the reads: the latency of GET /svc/v1/usage in
// each grouping over the last day, the last week and all time, of GET
// /svc/v1/generation for sampled ids and of GET /svc/v1/credits, each asked
// -reads times in a row by one client. Then the stalls: chat completions
// at a constant -rate (vegeta's constant pacer, keys taken in turn), in
// phases alternating between quiet and flooded, where -hammer clients ask
// GET /svc/v1/usage over all time as fast as they are answered, each with
// its own key (or one key, with -hammer-one-key).
//
// With -admin (the admin listener's base URL) and -admin-token, "admin" in
// -only measures the management reads the operator's page makes
// (docs/operator.md): the account list, one account, its usage chart, its
// keys and credits, the top spenders over 30 days and the audit log, each
// -reads times in a row, of the account that spent most; and a "mgmt" phase floods the admin listener with
// those reads (-hammer clients, one admin token) while the chat calls go
// on, to compare with the quiet phases of the same run.
//
// It imports nothing of svcgw's, like bench/load.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Result is everything the driver measured.
type Result struct {
	Reads      []Read  `json:"reads"`
	AdminReads []Read  `json:"admin_reads,omitempty"`
	Phases     []Phase `json:"phases"`
	Load       string  `json:"load_average"` // /proc/loadavg at the end
}

// Read is the latency of one kind of account read.
type Read struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	N       int       `json:"n"`
	Latency Quantiles `json:"latency"`
	Errors  int       `json:"errors"`
	Bytes   int       `json:"bytes"` // of the last answer
}

// Phase is one stretch of chat calls at the constant rate.
type Phase struct {
	Name       string         `json:"name"` // quiet or flood
	Calls      uint64         `json:"calls"`
	Success    float64        `json:"success_pct"`
	Latency    Quantiles      `json:"latency"`
	Statuses   map[string]int `json:"statuses"`
	Errors     []string       `json:"errors,omitempty"`
	Hammer     *Hammer        `json:"hammer,omitempty"`
	LoadBefore string         `json:"load_average_before"`
	// CPU is the CPU time svcgw used during the phase (user + system, from
	// /proc/PID/stat, with -pid), in milliseconds per second of the
	// phase: 1000 is one core busy.
	CPU float64 `json:"svcgw_cpu_ms_per_s,omitempty"`
}

// Hammer is what the usage flood did during a phase.
type Hammer struct {
	Clients  int            `json:"clients"`
	Keys     int            `json:"keys"`
	Requests int64          `json:"requests"`
	PerSec   float64        `json:"per_sec"`
	Latency  Quantiles      `json:"latency"` // of the 200s
	Statuses map[string]int `json:"statuses"`
}

// Quantiles are latencies in milliseconds.
type Quantiles struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ms(ds[max(i, 0)])
	}
	return Quantiles{P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type key struct{ id, secret, account string }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		base     = flag.String("base", "", "svcgw base URL, e.g. http://127.0.0.1:8080")
		secrets  = flag.String("secrets", "", "key file written by seed -secrets")
		sample   = flag.String("sample", "", "generation id sample written by seed -sample")
		endFlag  = flag.String("end", "", "RFC 3339 time of the last seeded call: the day and week read end with its day")
		reads    = flag.Int("reads", 500, "requests per kind of read")
		warm     = flag.Int("warm", 20, "unmeasured requests before each kind of read")
		rate     = flag.Int("rate", 1000, "chat completions per second")
		phaseDur = flag.Duration("phase", 20*time.Second, "length of each chat phase")
		phases   = flag.String("phases", "quiet,flood,quiet,flood", "chat phases, in order")
		chatKeys = flag.Int("chat-keys", 1000, "keys the chat calls take in turn")
		apps     = flag.Int("apps", 50, "applications: a chat call with key i says X-Title app-(i mod apps).example.com, as seed does")
		hammer   = flag.Int("hammer", 8, "clients asking for usage over all time during flood phases")
		oneKey   = flag.Bool("hammer-one-key", false, "all hammer clients use one key (else one key each)")
		only     = flag.String("only", "reads,stalls", "what to measure")
		pid      = flag.Int("pid", 0, "svcgw's process id: report the CPU time it used in each chat phase (Linux)")
		adminURL = flag.String("admin", "", "the admin listener's base URL, for the management reads (-only admin) and the mgmt phase")
		adminTok = flag.String("admin-token", "", "an admin token (a read-only one does) for -admin")
		out      = flag.String("out", "", "write the result JSON here")
	)
	flag.Parse()
	if *base == "" || *secrets == "" {
		return fmt.Errorf("-base and -secrets are required")
	}
	keys, err := readKeys(*secrets)
	if err != nil {
		return err
	}
	end := time.Now().UTC()
	if *endFlag != "" {
		if end, err = time.Parse(time.RFC3339, *endFlag); err != nil {
			return fmt.Errorf("-end: %w", err)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}
	var res Result
	if strings.Contains(*only, "reads") {
		ids, err := readSample(*sample)
		if err != nil {
			return err
		}
		res.Reads, err = measureReads(client, *base, keys, ids, end, *reads, *warm)
		if err != nil {
			return err
		}
	}
	var mgmt []namedPath
	if strings.Contains(*only, "admin") || strings.Contains(*phases, "mgmt") {
		if *adminURL == "" || *adminTok == "" {
			return fmt.Errorf("-only admin and the mgmt phase need -admin and -admin-token")
		}
		acct, err := topSpender(client, *adminURL, *adminTok)
		if err != nil {
			return err
		}
		mgmt = managementReads(acct, end)
	}
	if strings.Contains(*only, "admin") {
		res.AdminReads, err = measureAdminReads(client, *adminURL, *adminTok, mgmt, *reads, *warm)
		if err != nil {
			return err
		}
	}
	if strings.Contains(*only, "stalls") {
		for _, name := range strings.Split(*phases, ",") {
			cpu0, began := cpuTime(*pid), time.Now()
			var hammerTarget *adminTarget
			if name == "mgmt" {
				hammerTarget = &adminTarget{base: *adminURL, token: *adminTok, paths: mgmt}
			}
			p, err := runPhase(client, *base, keys, name, *rate, *phaseDur, min(*chatKeys, len(keys)), *apps, *hammer, *oneKey, hammerTarget)
			if cpu1 := cpuTime(*pid); cpu0 >= 0 && cpu1 >= 0 {
				p.CPU = ms(cpu1-cpu0) / time.Since(began).Seconds()
			}
			fmt.Fprintf(os.Stderr, "ledger: chat %-5s %d calls, %.2f%% ok, p50 %.3f ms, p99 %.3f ms, max %.3f ms, svcgw CPU %.0f ms/s%s\n",
				name, p.Calls, p.Success, p.Latency.P50, p.Latency.P99, p.Latency.Max, p.CPU, hammerLine(p.Hammer))
			if err != nil {
				return err
			}
			res.Phases = append(res.Phases, p)
		}
	}
	res.Load = loadavg()
	report(os.Stdout, &res)
	if *out != "" {
		b, err := json.MarshalIndent(&res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	return nil
}

func readKeys(path string) ([]key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []key
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 {
			k := key{id: fs[0], secret: fs[1]}
			if len(fs) >= 3 {
				k.account = fs[2]
			}
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no keys", path)
	}
	return keys, sc.Err()
}

// sampled is a generation id and the index of the key that made it.
type sampled struct {
	id  string
	key int
}

func readSample(path string) ([]sampled, error) {
	if path == "" {
		return nil, fmt.Errorf("-sample is required to measure reads")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []sampled
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s sampled
		if _, err := fmt.Sscan(line, &s.id, &s.key); err == nil {
			ids = append(ids, s)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: no ids", path)
	}
	return ids, nil
}

// get asks path with key and returns the status and the body's length.
func get(ctx context.Context, client *http.Client, base, path, secret string) (int, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, int(n), err
}

// measureReads times each kind of read, one request at a time.
func measureReads(client *http.Client, base string, keys []key, ids []sampled, end time.Time, n, warm int) ([]Read, error) {
	day := end.UTC().Format(time.DateOnly)
	weekStart := end.UTC().AddDate(0, 0, -6).Format(time.DateOnly)
	type kind struct {
		name string
		path func(i int) (string, string) // path and key secret
	}
	var kinds []kind
	// The usage reads are of keys[0]'s account (the flooders' when there
	// is one account), asked by its keys in turn: each key's account
	// requests per second are limited, and one reader is not a flood.
	var owners []string
	for _, k := range keys {
		if k.account == keys[0].account {
			owners = append(owners, k.secret)
		}
	}
	for _, rg := range []struct{ name, q string }{
		{"day", "&start_date=" + day + "&end_date=" + day},
		{"week", "&start_date=" + weekStart + "&end_date=" + day},
		{"all time", ""},
	} {
		for _, g := range []string{"day", "request_type", "application", "api_key"} {
			p := "/svc/v1/usage?group_by=" + g + rg.q
			kinds = append(kinds, kind{"usage " + g + ", " + rg.name, func(i int) (string, string) { return p, owners[i%len(owners)] }})
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	kinds = append(kinds,
		kind{"generation", func(int) (string, string) {
			s := ids[r.IntN(len(ids))]
			return "/svc/v1/generation?id=" + url.QueryEscape(s.id), keys[s.key].secret
		}},
		kind{"credits", func(i int) (string, string) { return "/svc/v1/credits", keys[i%len(keys)].secret }},
	)
	var out []Read
	ctx := context.Background()
	for _, k := range kinds {
		rd := Read{Name: k.name, N: n}
		lat := make([]time.Duration, 0, n)
		for i := range warm + n {
			p, secret := k.path(i)
			rd.Path = p
			began := time.Now()
			status, size, err := get(ctx, client, base, p, secret)
			took := time.Since(began)
			if err != nil || status != http.StatusOK {
				rd.Errors++
				if rd.Errors == 1 {
					fmt.Fprintf(os.Stderr, "ledger: %s: status %d, %v\n", p, status, err)
				}
				continue
			}
			rd.Bytes = size
			if i >= warm {
				lat = append(lat, took)
			}
		}
		rd.Latency = quantiles(lat)
		fmt.Fprintf(os.Stderr, "ledger: %-32s p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms  (%d errors)\n",
			rd.Name, rd.Latency.P50, rd.Latency.P99, rd.Latency.Max, rd.Errors)
		out = append(out, rd)
	}
	return out, nil
}

const chatBody = `{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":64}`

// runPhase sends chat completions at rate for d; a flood phase also runs
// the usage hammer.
func runPhase(client *http.Client, base string, keys []key, name string, rate int, d time.Duration, chatKeys, apps, hammerClients int, oneKey bool, admin *adminTarget) (Phase, error) {
	p := Phase{Name: name, Statuses: map[string]int{}, LoadBefore: loadavg()}
	targets := make([]vegeta.Target, chatKeys)
	for i := range targets {
		targets[i] = vegeta.Target{Method: http.MethodPost, URL: base + "/svc/v1/chat/completions", Body: []byte(chatBody),
			Header: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + keys[i].secret},
				"X-Title": {fmt.Sprintf("app-%02d.example.com", i%max(apps, 1))}}}
	}
	ctx, stop := context.WithCancel(context.Background())
	var (
		wg sync.WaitGroup
		h  *hammerState
	)
	switch name {
	case "quiet":
	case "flood":
		h = &hammerState{statuses: map[string]int{}}
		for i := range hammerClients {
			secret := keys[len(keys)-1-i].secret // keys the chat phase uses least
			if oneKey {
				secret = keys[len(keys)-1].secret
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.run(ctx, client, base, secret, i)
			}()
		}
	case "mgmt":
		h = &hammerState{statuses: map[string]int{}}
		for i := range hammerClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.runAdmin(ctx, client, admin, i)
			}()
		}
	default:
		stop()
		return p, fmt.Errorf("unknown phase %q (want quiet, flood or mgmt)", name)
	}
	started := time.Now()
	attacker := vegeta.NewAttacker(vegeta.Timeout(30*time.Second), vegeta.KeepAlive(true), vegeta.Connections(10000))
	var m vegeta.Metrics
	for r := range attacker.Attack(vegeta.NewStaticTargeter(targets...), vegeta.Rate{Freq: rate, Per: time.Second}, d, name) {
		m.Add(r)
	}
	m.Close()
	stop()
	wg.Wait()
	took := time.Since(started)
	p.Calls = m.Requests
	p.Success = m.Success * 100
	p.Latency = Quantiles{P50: ms(m.Latencies.P50), P90: ms(m.Latencies.P90), P99: ms(m.Latencies.P99), Max: ms(m.Latencies.Max)}
	for code, n := range m.StatusCodes {
		p.Statuses[code] = n
	}
	if len(m.Errors) > 0 {
		p.Errors = m.Errors[:min(len(m.Errors), 5)]
	}
	if h != nil {
		keysUsed := hammerClients
		if oneKey {
			keysUsed = 1
		}
		p.Hammer = &Hammer{Clients: hammerClients, Keys: keysUsed, Requests: h.n.Load(), PerSec: float64(h.n.Load()) / took.Seconds(),
			Latency: quantiles(h.lat), Statuses: h.statuses}
	}
	return p, nil
}

func hammerLine(h *Hammer) string {
	if h == nil {
		return ""
	}
	return fmt.Sprintf("; usage flood %d clients: %.0f req/s, p50 %.3f ms, p99 %.3f ms, statuses %v",
		h.Clients, h.PerSec, h.Latency.P50, h.Latency.P99, h.Statuses)
}

// hammerState collects what the flooding clients saw.
type hammerState struct {
	n        atomic.Int64
	mu       sync.Mutex
	lat      []time.Duration
	statuses map[string]int
}

// run asks for usage over all time, in turn by each grouping, until ctx
// ends. A request in flight then is let finish: a client that went away
// mid-request would be logged by svcgw as a failed request.
func (h *hammerState) run(ctx context.Context, client *http.Client, base, secret string, i int) {
	groups := []string{"day", "request_type", "application", "api_key"}
	for j := i; ctx.Err() == nil; j++ {
		began := time.Now()
		status, _, err := get(context.Background(), client, base, "/svc/v1/usage?group_by="+groups[j%len(groups)], secret)
		took := time.Since(began)
		h.n.Add(1)
		h.mu.Lock()
		if err != nil {
			h.statuses["error"]++
		} else {
			h.statuses[fmt.Sprint(status)]++
		}
		if err == nil && status == http.StatusOK {
			h.lat = append(h.lat, took)
		}
		h.mu.Unlock()
		if status == http.StatusTooManyRequests {
			time.Sleep(time.Millisecond) // as a client honouring the 429 would, briefly
		}
	}
}

// adminTarget is where the mgmt phase's clients send management reads.
type adminTarget struct {
	base, token string
	paths       []namedPath
}

// namedPath is one management read.
type namedPath struct{ name, path string }

// managementReads are the reads the operator's page makes, of the
// account acct: the account list (its first page of 50, each with its
// spend today and this month), the account, its usage chart over 30 days,
// its keys and credits, the top spenders over 30 days (usage grouped by
// account, over every account) and the audit log.
func managementReads(acct string, end time.Time) []namedPath {
	day := end.UTC().Format(time.DateOnly)
	month := end.UTC().AddDate(0, 0, -29).Format(time.DateOnly)
	a := url.PathEscape(acct)
	return []namedPath{
		{"accounts list (50)", "/admin/v1/accounts?limit=50"},
		{"account", "/admin/v1/accounts/" + a},
		{"usage chart, 30 days", "/admin/v1/usage?group_by=day&account=" + url.QueryEscape(acct) + "&start_date=" + month + "&end_date=" + day},
		{"top spenders, 30 days", "/admin/v1/usage?group_by=account&start_date=" + month + "&end_date=" + day},
		{"keys", "/admin/v1/accounts/" + a + "/keys"},
		{"credits", "/admin/v1/accounts/" + a + "/credits?limit=50"},
		{"audit log", "/admin/v1/audit?limit=50"},
	}
}

// topSpender is the account that spent most over all time, as the
// operator's page finds it (usage grouped by account).
func topSpender(client *http.Client, base, token string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/admin/v1/usage?group_by=account", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("admin usage by account: %d %s", resp.StatusCode, b)
	}
	var report struct {
		Data []struct {
			Bucket   string `json:"bucket"`
			Requests int64  `json:"requests"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		return "", fmt.Errorf("admin usage by account: %w", err)
	}
	best, most := "", int64(-1)
	for _, b := range report.Data {
		if b.Requests > most {
			best, most = b.Bucket, b.Requests
		}
	}
	if best == "" {
		return "", fmt.Errorf("admin usage by account: no account has calls")
	}
	return best, nil
}

// measureAdminReads times each management read, one request at a time.
func measureAdminReads(client *http.Client, base, token string, paths []namedPath, n, warm int) ([]Read, error) {
	var out []Read
	ctx := context.Background()
	for _, np := range paths {
		rd := Read{Name: np.name, Path: np.path, N: n}
		lat := make([]time.Duration, 0, n)
		for i := range warm + n {
			began := time.Now()
			status, size, err := get(ctx, client, base, np.path, token)
			took := time.Since(began)
			if err != nil || status != http.StatusOK {
				rd.Errors++
				if rd.Errors == 1 {
					fmt.Fprintf(os.Stderr, "ledger: admin %s: status %d, %v\n", np.path, status, err)
				}
				continue
			}
			rd.Bytes = size
			if i >= warm {
				lat = append(lat, took)
			}
		}
		if rd.Errors == warm+n {
			return out, fmt.Errorf("admin %s: every request failed", np.path)
		}
		rd.Latency = quantiles(lat)
		fmt.Fprintf(os.Stderr, "ledger: admin %-26s p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms  (%d errors)\n",
			rd.Name, rd.Latency.P50, rd.Latency.P99, rd.Latency.Max, rd.Errors)
		out = append(out, rd)
	}
	return out, nil
}

// runAdmin sends the management reads in turn until ctx ends, as the
// usage flood does.
func (h *hammerState) runAdmin(ctx context.Context, client *http.Client, t *adminTarget, i int) {
	for j := i; ctx.Err() == nil; j++ {
		began := time.Now()
		status, _, err := get(context.Background(), client, t.base, t.paths[j%len(t.paths)].path, t.token)
		took := time.Since(began)
		h.n.Add(1)
		h.mu.Lock()
		if err != nil {
			h.statuses["error"]++
		} else {
			h.statuses[fmt.Sprint(status)]++
		}
		if err == nil && status == http.StatusOK {
			h.lat = append(h.lat, took)
		}
		h.mu.Unlock()
	}
}

// cpuTime is the user and system time process pid has used, or -1 when
// it cannot be read (no -pid, not Linux).
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): utime and stime are the 14th and 15th of the line.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return -1
	}
	var utime, stime int64
	if _, err := fmt.Sscan(f[11]+" "+f[12], &utime, &stime); err != nil {
		return -1
	}
	const ticks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return time.Duration(utime+stime) * time.Second / ticks
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// report prints the result as Markdown tables.
func report(w io.Writer, r *Result) {
	if len(r.Reads) > 0 {
		fmt.Fprintln(w, "| read | p50 (ms) | p99 (ms) | max (ms) | errors | body bytes |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, rd := range r.Reads {
			fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %d | %d |\n", rd.Name, rd.Latency.P50, rd.Latency.P99, rd.Latency.Max, rd.Errors, rd.Bytes)
		}
		fmt.Fprintln(w)
	}
	if len(r.AdminReads) > 0 {
		fmt.Fprintln(w, "| management read | p50 (ms) | p99 (ms) | max (ms) | errors | body bytes |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, rd := range r.AdminReads {
			fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %d | %d |\n", rd.Name, rd.Latency.P50, rd.Latency.P99, rd.Latency.Max, rd.Errors, rd.Bytes)
		}
		fmt.Fprintln(w)
	}
	if len(r.Phases) == 0 {
		return
	}
	var quiet []Phase
	for _, p := range r.Phases {
		if p.Name == "quiet" {
			quiet = append(quiet, p)
		}
	}
	var q50, q99, qcpu float64
	for _, p := range quiet {
		q50 += p.Latency.P50 / float64(len(quiet))
		q99 += p.Latency.P99 / float64(len(quiet))
		qcpu += p.CPU / float64(len(quiet))
	}
	fmt.Fprintln(w, "| chat phase | calls | success | p50 (ms) | p99 (ms) | max (ms) | added p50 / p99 over the quiet mean (ms) | flood (usage, or management reads) | svcgw CPU (ms/s) | flood's CPU per request (µs) | load before |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
	for _, p := range r.Phases {
		added, flood, perReq := "", "", ""
		if (p.Name == "flood" || p.Name == "mgmt") && len(quiet) > 0 {
			added = fmt.Sprintf("%+.3f / %+.3f", p.Latency.P50-q50, p.Latency.P99-q99)
		}
		if h := p.Hammer; h != nil {
			flood = fmt.Sprintf("%d clients, %d keys: %.0f req/s, p50 %.3f / p99 %.3f ms, %v", h.Clients, h.Keys, h.PerSec, h.Latency.P50, h.Latency.P99, h.Statuses)
			// What the phase cost svcgw beyond the quiet phases' mean,
			// per flood request: the flood's own cost, and what it made
			// the ledger do.
			if p.CPU > 0 && qcpu > 0 && h.PerSec > 0 {
				perReq = fmt.Sprintf("%.0f", (p.CPU-qcpu)*1000/h.PerSec)
			}
		}
		cpu := ""
		if p.CPU > 0 {
			cpu = fmt.Sprintf("%.0f", p.CPU)
		}
		fmt.Fprintf(w, "| %s | %d | %.2f%% | %.3f | %.3f | %.3f | %s | %s | %s | %s | %s |\n",
			p.Name, p.Calls, p.Success, p.Latency.P50, p.Latency.P99, p.Latency.Max, added, flood, cpu, perReq, p.LoadBefore)
	}
	fmt.Fprintln(w)
}
