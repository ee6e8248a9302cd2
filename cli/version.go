package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version, Commit and Date describe a release build. The release build
// sets them (.goreleaser.yaml):
//
//	-ldflags "-X github.com/svcgw/svcgw/cli.Version=1.2.3
//	          -X github.com/svcgw/svcgw/cli.Commit=<full hash>
//	          -X github.com/svcgw/svcgw/cli.Date=2026-01-15T10:00:00Z"
//
// Any other build falls back to what the Go toolchain recorded (see
// readBuild).
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

// build is what svcgw --version prints and serve's first log line carries.
type build struct {
	Version string // 1.2.3, v1.2.3 (go install …@v1.2.3), or "devel"
	Commit  string // full hash, "-dirty" when built from a modified tree; "unknown"
	Date    string // RFC 3339; "unknown"
	// DateIsCommit reports that Date is the commit's time (a plain go
	// build in a clone), not the release build's.
	DateIsCommit bool
	Go           string // go1.26.8 linux/amd64
}

// readBuild reads the build's identity: the -X values of a release build,
// else the module version and the VCS settings the toolchain stamps into a
// go build run inside a clone (debug.ReadBuildInfo).
func readBuild() build {
	bi, _ := debug.ReadBuildInfo()
	return newBuild(Version, Commit, Date, bi)
}

func newBuild(version, commit, date string, bi *debug.BuildInfo) build {
	b := build{Version: version, Commit: commit, Date: date, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		var revision, modified, vcsTime string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			case "vcs.time":
				vcsTime = s.Value
			}
		}
		if b.Commit == "" && revision != "" {
			b.Commit = revision
			if modified == "true" {
				b.Commit += "-dirty"
			}
		}
		if b.Date == "" && vcsTime != "" {
			b.Date, b.DateIsCommit = vcsTime, true
		}
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

// String is the --version line: svcgw 1.2.3 (commit 0123456789ab, built
// 2026-01-15T10:00:00Z, go1.26.8 linux/amd64).
func (b build) String() string {
	commit := b.Commit
	if hash, dirty, ok := strings.Cut(commit, "-"); len(hash) > 12 {
		commit = hash[:12]
		if ok {
			commit += "-" + dirty
		}
	}
	when := "built " + b.Date
	if b.DateIsCommit {
		when = "committed " + b.Date
	}
	return fmt.Sprintf("svcgw %s (commit %s, %s, %s)", b.Version, commit, when, b.Go)
}
