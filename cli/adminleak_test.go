//go:build unix

package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
)

// TestServe_NoEndpointShowsThePostgresPassword serves a PostgreSQL
// database whose role must log in with a password, given on the command
// line in --db, and reads every endpoint of both listeners, the logs and
// the errors of a wrong password: none shows it. /debug/pprof/cmdline
// shows the command line with the password redacted.
func TestServe_NoEndpointShowsThePostgresPassword(t *testing.T) {
	is := is.New(t)
	dsn, password := pgtest.PasswordDSN(t)
	code, _, errOut := run(t, dsn, "init")
	is.Equal(code, 0) // init
	is.True(!strings.Contains(errOut, password))
	code, key, errOut := run(t, dsn, "keys", "create", "--account", "acme")
	is.Equal(code, 0) // keys create
	is.True(!strings.Contains(errOut, password))
	key = strings.TrimSpace(key)
	code, _, _ = run(t, dsn, "credits", "add", "--account", "acme", "5")
	is.Equal(code, 0) // credits add

	adminToken := newAdminToken(t, dsn, false)
	admin := freeAddr(t)
	srv := startServer(t, dsn, "--admin-addr", admin, "--log-level", "debug")
	client := &http.Client{Timeout: 30 * time.Second}
	status, _, body, _ := call(t, client, srv.addr, key)
	is.Equal(status, http.StatusOK) // a call, served from PostgreSQL
	id := generationID(t, body)

	// get reads one endpoint and returns its body, decompressed if it is
	// a gzipped profile, so that a password in it would be seen.
	get := func(method, base, path string, auth bool) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		is.NoErr(err)
		switch {
		case strings.HasPrefix(base, "http://"+admin):
			req.Header.Set("Authorization", "Bearer "+adminToken) // the admin listener's
		case auth:
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		is.NoErr(err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		is.NoErr(err)
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			if unzipped, err := io.ReadAll(zr); err == nil {
				b = unzipped
			}
		}
		return resp.StatusCode, b
	}
	adminBase, callerBase := "http://"+admin, "http://"+srv.addr
	_, index := get("GET", adminBase, "/debug/pprof/", false)
	is.True(bytes.Contains(index, []byte("goroutine"))) // the profiles' index
	reads := []struct {
		method, base, path string
		auth               bool
	}{
		{"GET", adminBase, "/metrics", false},
		{"GET", adminBase, "/readyz", false},
		{"GET", adminBase, "/healthz", false},
		{"POST", adminBase, "/-/reload", false},
		{"GET", adminBase, "/debug/pprof/", false},
		{"GET", adminBase, "/debug/pprof/cmdline", false},
		{"GET", adminBase, "/debug/pprof/symbol", false},
		{"GET", adminBase, "/debug/pprof/profile?seconds=1", false},
		{"GET", adminBase, "/debug/pprof/trace?seconds=1", false},
		{"GET", callerBase, "/healthz", false},
		{"GET", callerBase, "/readyz", false},
		{"GET", callerBase, "/svc/v1/credits", true},
		{"GET", callerBase, "/svc/v1/usage", true},
		{"GET", callerBase, "/svc/v1/generations", true},
		{"GET", callerBase, "/svc/v1/generation?id=" + id, true},
		{"GET", callerBase, "/svc/v1/models", true},
		{"GET", callerBase, "/svc/v1/nowhere", true},
		{"GET", callerBase, "/svc/v1/credits", false}, // the 401
	}
	for _, p := range []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"} {
		reads = append(reads,
			struct {
				method, base, path string
				auth               bool
			}{"GET", adminBase, "/debug/pprof/" + p + "?debug=2", false},
			struct {
				method, base, path string
				auth               bool
			}{"GET", adminBase, "/debug/pprof/" + p, false})
	}
	for _, r := range reads {
		status, b := get(r.method, r.base, r.path, r.auth)
		if bytes.Contains(b, []byte(password)) {
			t.Errorf("%s %s%s (%d) shows the password", r.method, r.base, r.path, status)
		}
	}
	status, cmdline := get("GET", adminBase, "/debug/pprof/cmdline", false)
	is.Equal(status, http.StatusOK)
	args := strings.Split(string(cmdline), "\x00")
	u, _ := url.Parse(dsn)
	var db string
	for i, a := range args {
		if a == "--db" && i+1 < len(args) {
			db = args[i+1]
		}
	}
	is.True(strings.Contains(db, u.User.Username()+":xxxxx@")) // the URL is there, redacted
	is.True(!strings.Contains(string(cmdline), password))

	// Wrong passwords fail with the role and database named, never the
	// password tried.
	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), "Wr0ngPassw0rd")
	code, _, errOut = run(t, wrong.String(), "keys", "list")
	is.Equal(code, 1)                                                   // refused by PostgreSQL
	is.True(strings.Contains(errOut, "password authentication failed")) // and says so
	is.True(!strings.Contains(errOut, "Wr0ngPassw0rd"))

	// Stopped: the whole log, start to end, never had it either.
	is.NoErr(srv.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-srv.exited:
		srv.exited <- err // for startServer's cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	logs := srv.stderr.String()
	is.True(strings.Contains(logs, "svcgw listening")) // the log is there
	is.True(strings.Contains(logs, "xxxxx"))           // naming the database, redacted
	is.True(!strings.Contains(logs, password))
}

// TestPostgres_PasswordOffTheCommandLine: the password of a role that
// must give one can come from PGPASSWORD, a PGPASSFILE (both read by
// pgx, as by libpq), or the whole URL from --db-file; without any of
// them the login is refused, so each is what let it in.
func TestPostgres_PasswordOffTheCommandLine(t *testing.T) {
	is := is.New(t)
	dsn, password := pgtest.PasswordDSN(t)
	u, _ := url.Parse(dsn)
	bare := *u
	bare.User = url.User(u.User.Username())
	dir := t.TempDir()
	t.Setenv("PGPASSFILE", filepath.Join(dir, "none")) // not ~/.pgpass
	t.Setenv("PGPASSWORD", "")
	os.Unsetenv("PGPASSWORD")

	code, _, errOut := run(t, bare.String(), "init")
	is.Equal(code, 1) // no password: refused
	is.True(strings.Contains(errOut, "password authentication failed") || strings.Contains(errOut, "password"))

	t.Setenv("PGPASSWORD", password)
	code, _, errOut = run(t, bare.String(), "init")
	is.Equal(code, 0) // PGPASSWORD
	is.True(!strings.Contains(errOut, password))
	os.Unsetenv("PGPASSWORD")

	passfile := filepath.Join(dir, "pgpass")
	is.NoErr(os.WriteFile(passfile, []byte("*:*:*:"+u.User.Username()+":"+password+"\n"), 0o600))
	t.Setenv("PGPASSFILE", passfile)
	code, _, errOut = run(t, bare.String(), "keys", "create", "--account", "acme")
	is.Equal(code, 0) // PGPASSFILE
	is.True(!strings.Contains(errOut, password))
	t.Setenv("PGPASSFILE", filepath.Join(dir, "none"))

	dbFile := filepath.Join(dir, "db-url")
	is.NoErr(os.WriteFile(dbFile, []byte(dsn+"\n"), 0o600))
	var out, errb bytes.Buffer
	code = Run(context.Background(), []string{"--db-file", dbFile, "keys", "list"}, &out, &errb)
	is.Equal(code, 0) // --db-file
	is.True(strings.Contains(out.String(), "acme"))

	// serve with --db-file: its command line names the file only.
	admin := freeAddr(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	logs := &syncBuffer{}
	go func() {
		done <- Run(ctx, []string{"--db-file", dbFile, "serve", "--addr", addr, "--admin-addr", admin}, io.Discard, logs)
	}()
	defer func() {
		cancel()
		is.Equal(<-done, 0) // serve
		is.True(!strings.Contains(logs.String(), password))
	}()
	waitHealthy(t, addr, logs)
	st, _ := readyz(t, addr)
	is.Equal(st, http.StatusOK) // serving the database the file names

	errb.Reset()
	code = Run(context.Background(), []string{"--db", dsn, "--db-file", dbFile, "keys", "list"}, io.Discard, &errb)
	is.Equal(code, 2) // both: a usage error
	is.True(strings.Contains(errb.String(), "name the database twice"))
}
