package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcgw/svcgw/cli"
)

// The README's runnable blocks.
//
// A fenced ```sh or ```go block right after a line holding only
//
//	<!-- runnable -->
//
// is run by TestREADME_RunnableBlocks against a fresh `svcgw serve`, in the
// order the README gives them, so the quick start cannot rot. A ```text
// block right after a line holding only
//
//	<!-- expect -->
//
// is what the runnable block before it prints, line for line; … in it
// matches anything within a line (ids, dates).
//
// The blocks run as a reader would run them after the quick start: in a
// directory where `./svcgw serve` is running on the embedded defaults
// (svcgw.db beside it), with `svcgw` and `./svcgw` both this binary, KEY
// holding the key serve printed, and 127.0.0.1:8080 standing for the
// address serve listens on (a free port here). All sh blocks run in one
// bash, so a variable one sets is there for the next. Each go block is a
// whole program, run with `go run` inside this module (which requires the
// three SDKs), with KEY and SVCGW_URL (http://ADDR) in its environment;
// its text is not changed, so an unchanged program is not built again.
const (
	runnableMarker = "<!-- runnable -->"
	expectMarker   = "<!-- expect -->"
	readmeAddr     = "127.0.0.1:8080"
)

// TestMain lets the test binary be svcgw itself: invoked as `svcgw` (the
// README test puts a link by that name on PATH) it runs main. So the
// README's commands run the code under test, race detector included, and
// nothing is built twice.
func TestMain(m *testing.M) {
	if name := filepath.Base(os.Args[0]); name == "svcgw" || name == "svcgw.exe" {
		main()
		return
	}
	os.Exit(m.Run())
}

type readmeBlock struct {
	line   int    // of the opening fence, 1-based
	lang   string // sh or go
	code   string
	expect *string // what it prints, or nil
}

// readmeBlocks returns README.md's runnable blocks. A marker that is not
// followed by the fence it announces fails the test: a marker that
// silently matches nothing would be a test that silently runs nothing.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []readmeBlock
	fence := func(i int, marker string, langs ...string) (lang, body string, next int) {
		if i+1 >= len(lines) {
			t.Fatalf("README.md:%d: %s is not followed by a fenced block", i+1, marker)
		}
		open := strings.TrimSpace(lines[i+1])
		lang, isFence := strings.CutPrefix(open, "```")
		if !isFence || !slices.Contains(langs, lang) {
			t.Fatalf("README.md:%d: %s must be followed by a ```%s fence, not %q", i+1, marker, strings.Join(langs, " or ```"), open)
		}
		var sb strings.Builder
		for j := i + 2; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				return lang, sb.String(), j
			}
			sb.WriteString(lines[j])
			sb.WriteString("\n")
		}
		t.Fatalf("README.md:%d: unterminated block", i+2)
		return "", "", 0
	}
	for i := 0; i < len(lines); i++ {
		switch strings.TrimSpace(lines[i]) {
		case runnableMarker:
			lang, body, end := fence(i, runnableMarker, "sh", "go")
			blocks = append(blocks, readmeBlock{line: i + 2, lang: lang, code: body})
			i = end
		case expectMarker:
			_, body, end := fence(i, expectMarker, "text")
			if len(blocks) == 0 || blocks[len(blocks)-1].expect != nil {
				t.Fatalf("README.md:%d: %s follows no runnable block", i+1, expectMarker)
			}
			blocks[len(blocks)-1].expect = &body
			i = end
		}
	}
	return blocks
}

func TestREADME_RunnableBlocks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the README's blocks are POSIX shell")
	}
	blocks := readmeBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("README.md marks no block runnable")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to run the README's shell blocks")
	}

	dir := readmeDir(t)
	env := readmeEnv(dir)
	addr, key := startReadmeServer(t, dir, env)
	env = append(env, "SVCGW_API_KEY="+key)
	localize := func(s string) string { return strings.ReplaceAll(s, readmeAddr, addr) }

	// Every sh block, in order, in one bash; a marker line before each
	// splits the output by block.
	var script strings.Builder
	script.WriteString("set -euo pipefail\nexec 2>&1\n")
	for i, b := range blocks {
		if b.lang == "sh" {
			fmt.Fprintf(&script, "printf '\\n@@block %d@@\\n'\n%s", i, localize(b.code))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	t.Logf("shell blocks: %s", time.Since(start).Round(time.Millisecond))
	outputs, last := splitBlockOutput(string(out))
	if runErr != nil {
		b := blocks[last]
		t.Fatalf("README.md:%d: the block failed (%v); it printed:\n%s\nthe block:\n%s", b.line, runErr, outputs[last], b.code)
	}
	for i, b := range blocks {
		switch b.lang {
		case "sh":
			checkExpect(t, b, outputs[i])
		case "go":
			start := time.Now()
			checkExpect(t, b, runGoBlock(t, b, b.code, append(env, "SVCGW_URL=http://"+addr)))
			t.Logf("README.md:%d go block: %s", b.line, time.Since(start).Round(time.Millisecond))
		}
	}
}

// readmeEnv is the environment of the README's commands: this process's,
// without any SVCGW_ setting, with dir (holding the svcgw link) first on
// PATH.
func readmeEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SVCGW_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

var (
	listening = regexp.MustCompile(`msg="svcgw listening" addr=(\S+)`)
	bootKey   = regexp.MustCompile(`llm_live_[A-Za-z0-9]+`)
)

// startReadmeServer runs `./svcgw serve` in dir, as the quick start does,
// on a port the kernel picks; it returns the address and the key serve
// printed, and stops serve (checking it exits cleanly) when the test ends.
func startReadmeServer(t *testing.T, dir string, env []string) (addr, key string) {
	t.Helper()
	cmd := exec.Command("./svcgw", "serve", "--addr", "127.0.0.1:0")
	cmd.Dir, cmd.Env = dir, env
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("svcgw serve: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("svcgw serve did not stop on SIGTERM\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("svcgw serve exited: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	key = bootKey.FindString(stderr.String())
	if addr == "" || key == "" {
		t.Fatalf("svcgw serve printed no address or key:\n%s", stderr.String())
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return addr, key
}

// splitBlockOutput splits the bash output at the block markers; last is
// the index of the last block that started.
func splitBlockOutput(out string) (outputs map[int]string, last int) {
	outputs = map[int]string{}
	cur := -1
	var sb strings.Builder
	flush := func() {
		if cur >= 0 {
			outputs[cur] = strings.TrimPrefix(sb.String(), "\n")
		}
		sb.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "@@block %d@@", &n); err == nil {
			flush()
			cur, last = n, n
			continue
		}
		sb.WriteString(sc.Text())
		sb.WriteString("\n")
	}
	flush()
	return outputs, last
}

// runGoBlock runs a go block as a program of this module, so it builds
// with the SDK versions go.mod requires. The file's path is a function of
// its content, so an unchanged block's executable comes from the build
// cache (go run caches it) instead of being linked again.
func runGoBlock(t *testing.T, b readmeBlock, code string, env []string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(code))
	dir := filepath.Join(os.TempDir(), "svcgw-readme-"+hex.EncodeToString(sum[:8]))
	file := filepath.Join(dir, "main.go")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Written whole and renamed, so a test running beside this one never
	// reads half a file.
	tmp, err := os.CreateTemp(dir, "main-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmp.WriteString(code)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", file)
	cmd.Env = env // the module root is this test's working directory
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README.md:%d: go run: %v\n%s", b.line, err, out)
	}
	return string(out)
}

// checkExpect compares a block's output with its expect block, if any.
func checkExpect(t *testing.T, b readmeBlock, got string) {
	t.Helper()
	if b.expect == nil {
		return
	}
	want := strings.Split(strings.TrimRight(*b.expect, "\n"), "\n")
	have := strings.Split(strings.TrimRight(strings.ReplaceAll(got, "\r\n", "\n"), "\n"), "\n")
	ok := len(want) == len(have)
	for i := 0; ok && i < len(want); i++ {
		ok = expectLine(want[i]).MatchString(have[i])
	}
	if !ok {
		t.Errorf("README.md:%d: the block printed\n%s\nwhere the README shows\n%s", b.line, got, *b.expect)
	}
}

// expectLine turns an expected line into a pattern: … matches anything.
func expectLine(s string) *regexp.Regexp {
	parts := strings.Split(s, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// lockedBuffer is a bytes.Buffer for one writer and concurrent readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestREADME_DocumentsEveryFlag checks that the README's reference names
// every flag of every command and every environment variable they read,
// as `svcgw COMMAND --help` lists them.
func TestREADME_DocumentsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	help := func(args ...string) string {
		var out bytes.Buffer
		if code := cli.Run(context.Background(), append(args, "--help"), &out, &out); code != 0 {
			t.Fatalf("svcgw %s --help: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
		return out.String()
	}
	commands := [][]string{nil}
	_, list, _ := strings.Cut(help(), "Commands:")
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "    ") {
			continue // not a command line (its description is indented further)
		}
		var words []string
		for _, w := range strings.Fields(line) {
			if strings.ContainsAny(w, "-[<") {
				break
			}
			words = append(words, w)
		}
		commands = append(commands, words)
	}
	if len(commands) < 10 {
		t.Fatalf("found only %d commands in svcgw --help", len(commands))
	}
	flag := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`)
	envVar := regexp.MustCompile(`\$(SVCGW_[A-Z0-9_]+)`)
	for _, cmd := range commands {
		h := help(cmd...)
		for _, m := range flag.FindAllStringSubmatch(h, -1) {
			if m[1] != "--help" && !bytes.Contains(readme, []byte("`"+m[1]+"`")) {
				t.Errorf("README.md does not document svcgw %s %s", strings.Join(cmd, " "), m[1])
			}
		}
		for _, m := range envVar.FindAllStringSubmatch(h, -1) {
			if !bytes.Contains(readme, []byte("`"+m[1]+"`")) {
				t.Errorf("README.md does not document %s (svcgw %s)", m[1], strings.Join(cmd, " "))
			}
		}
	}
}

// The README's reset step works after a clean stop (when SQLite's
// companions are gone), leaves nothing of the database behind, and every
// file serve leaves in a clone is one .gitignore ignores.
func TestREADME_ResetStep(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "<!-- reset -->")
	if !ok {
		t.Fatal("README.md has no <!-- reset --> block")
	}
	_, after, _ = strings.Cut(after, "```sh\n")
	reset, _, _ := strings.Cut(after, "```")
	dir := readmeDir(t)
	env := readmeEnv(dir)
	cmd := exec.Command("./svcgw", "serve", "--addr", "127.0.0.1:0")
	cmd.Dir, cmd.Env = dir, env
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !listening.MatchString(stderr.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("svcgw serve did not start:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("svcgw serve: %v\n%s", err, stderr.String())
	}

	var ignore []string
	gi, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(gi), "\n") {
		if l = strings.TrimPrefix(strings.TrimSpace(l), "/"); l != "" && !strings.HasPrefix(l, "#") {
			ignore = append(ignore, l)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range left {
		if !slices.ContainsFunc(ignore, func(p string) bool { ok, _ := filepath.Match(p, f.Name()); return ok }) {
			t.Errorf("serve left %s, which .gitignore does not ignore", f.Name())
		}
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to run the README's reset step")
	}
	rm := exec.Command(bash, "-euo", "pipefail", "-c", strings.TrimSpace(reset))
	rm.Dir, rm.Env = dir, env
	if out, err := rm.CombinedOutput(); err != nil {
		t.Fatalf("README.md's reset step failed after a clean stop: %v\n%s", err, out)
	}
	left, _ = os.ReadDir(dir)
	for _, f := range left {
		if strings.HasPrefix(f.Name(), "svcgw.db") {
			t.Errorf("the reset step left %s", f.Name())
		}
	}
}

// One name for the key in the first hour: the README's examples, the
// recipes and the dashboard's snippets all read SVCGW_API_KEY.
func TestREADME_OneNameForTheKey(t *testing.T) {
	for _, f := range []string{"README.md", "surfaces/dashboard/static/app.js", "surfaces/dashboard/static/index.html"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "SVCGW_API_KEY") {
			t.Errorf("%s never names SVCGW_API_KEY", f)
		}
		for _, other := range regexp.MustCompile(`\$KEY\b|\bKEY=|"KEY"|apiKey: KEY\b|SVCGW_KEY\b`).FindAllString(string(b), -1) {
			t.Errorf("%s calls the key %s", f, other)
		}
	}
}

// readmeDir is a directory like the reader's clone after
// `go build -o svcgw .`: ./svcgw runs this test binary, which is svcgw.
func readmeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "svcgw")); err != nil {
		t.Fatal(err)
	}
	return dir
}
