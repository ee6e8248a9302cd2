package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestNewBuild(t *testing.T) {
	const hash = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/svcgw/svcgw", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: hash},
				{Key: "vcs.time", Value: "2026-01-15T10:00:00Z"}, {Key: "vcs.modified", Value: modified}}}
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  string
	}{
		{"release build (ldflags)", "1.2.3", hash, "2026-02-01T08:00:00Z", vcs("false"),
			"svcgw 1.2.3 (commit 0123456789ab, built 2026-02-01T08:00:00Z, go1.26.8 " + platform + ")"},
		{"go build in a clean clone", "", "", "", vcs("false"),
			"svcgw devel (commit 0123456789ab, committed 2026-01-15T10:00:00Z, go1.26.8 " + platform + ")"},
		{"go build in a modified clone", "", "", "", vcs("true"),
			"svcgw devel (commit 0123456789ab-dirty, committed 2026-01-15T10:00:00Z, go1.26.8 " + platform + ")"},
		{"go install of a tag", "", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"svcgw v1.2.3 (commit unknown, built unknown, go1.26.8 " + platform + ")"},
		{"nothing recorded", "", "", "", nil,
			"svcgw devel (commit unknown, built unknown, " + runtime.Version() + " " + platform + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(newBuild(tc.version, tc.commit, tc.date, tc.bi).String(), tc.want)
		})
	}
}

func TestCLI_VersionFlag(t *testing.T) {
	is := is.New(t)
	code, out, _ := run(t, filepath.Join(t.TempDir(), "x.db"), "--version")
	is.Equal(code, 0)
	is.True(regexp.MustCompile(`^svcgw \S+ \(commit \S+, (built|committed) \S+, go\S+ \S+/\S+\)\n$`).MatchString(out)) // version, commit, date, toolchain
}

func TestServe_StartupLogCarriesTheBuild(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- Run(ctx, []string{"--db", db, "serve", "--addr", addr, "--log-format", "json"}, io.Discard, stderr)
	}()
	for i := 0; i < 200; i++ {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	cancel()
	is.Equal(<-done, 0)
	var line string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, `"msg":"svcgw listening"`) {
			line = l
		}
	}
	is.True(line != "") // the startup line
	b := readBuild()
	for _, kv := range []string{`"version":"` + b.Version + `"`, `"commit":"` + b.Commit + `"`, `"built":"` + b.Date + `"`} {
		is.True(strings.Contains(line, kv)) // carries the build
	}
}
