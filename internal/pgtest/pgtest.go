// Package pgtest gives tests a real PostgreSQL database: a fresh, empty
// database per test, on a throwaway cluster the test binary starts itself
// from the PostgreSQL binaries installed on the machine (initdb, then the
// postgres server in a temporary directory, listening only on a Unix
// socket there), or on the server SVCGW_TEST_POSTGRES_URL names.
//
// Without PostgreSQL, tests that ask for it skip with a message saying
// how to get it; with SVCGW_REQUIRE_POSTGRES=1 (set by .ci/run) they fail
// instead. A package whose tests use it calls Main from its TestMain, so
// that the cluster is stopped when the tests end; the server is also
// started with a parent-death signal, so it never outlives a test binary
// that is killed.
//
// pgtest imports nothing of svcgw's. It is imported by tests only.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables.
const (
	// EnvURL names a PostgreSQL server to use instead of starting one: a
	// postgres:// URL of a role that may create databases.
	EnvURL = "SVCGW_TEST_POSTGRES_URL"
	// EnvRequire set to 1 turns a missing PostgreSQL into a failure.
	EnvRequire = "SVCGW_REQUIRE_POSTGRES"
)

var (
	once    sync.Once
	cluster *server // nil when none could be had
	failure error   // why not
	seq     atomic.Int64
)

// server is a PostgreSQL server the tests create databases on.
type server struct {
	admin string    // URL of the maintenance database, for CREATE DATABASE
	base  *url.URL  // admin with the database name to be replaced
	dir   string    // the cluster's directory, when started here
	cmd   *exec.Cmd // the postgres process, when started here
}

// Main runs the tests and then stops the cluster if one was started. Call
// it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if cluster != nil && cluster.cmd != nil {
		cluster.stop()
	}
	return code
}

// Available reports whether a PostgreSQL server can be had, starting the
// throwaway cluster if needed; err says why not.
func Available() (ok bool, err error) {
	once.Do(func() { cluster, failure = start() })
	return cluster != nil, failure
}

// DSN returns the URL of a new, empty database for t, dropped when t ends.
// Without PostgreSQL it skips t (fails it under SVCGW_REQUIRE_POSTGRES=1).
func DSN(t testing.TB) string {
	t.Helper()
	if ok, err := Available(); !ok {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("PostgreSQL is required (%s=1) but not available: %v", EnvRequire, err)
		}
		t.Skipf("PostgreSQL tests skipped: %v (install Debian's postgresql package, or set %s)", err, EnvURL)
	}
	name := fmt.Sprintf("svcgw_test_%d_%d", os.Getpid(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cluster.exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cluster.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u := *cluster.base
	u.Path = "/" + name
	return u.String()
}

// passwordGroup is the role whose members the throwaway cluster asks for
// a password (scram-sha-256); it trusts every other role.
const passwordGroup = "svcgw_password_login"

// PasswordDSN returns, like DSN, the URL of a new, empty database for t,
// owned by a new role that must log in with a password: the password is
// in the URL (user:password@), and returned alone too. On the throwaway
// cluster a wrong or missing password is refused; on a server of
// SVCGW_TEST_POSTGRES_URL, its pg_hba.conf decides.
func PasswordDSN(t testing.TB) (dsn, password string) {
	t.Helper()
	dsn = DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	role := db + "_owner"
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	password = hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sql := range []string{
		"DO $$ BEGIN CREATE ROLE " + passwordGroup + " NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
		"CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "' IN ROLE " + passwordGroup,
		"ALTER DATABASE " + db + " OWNER TO " + role,
	} {
		if err := cluster.exec(ctx, sql); err != nil {
			t.Fatalf("password role: %v", err)
		}
	}
	t.Cleanup(func() { // before DSN's: the database goes first, then its owner
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, sql := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "DROP ROLE IF EXISTS " + role} {
			if err := cluster.exec(ctx, sql); err != nil {
				t.Logf("drop password role: %v", err)
			}
		}
	})
	u.User = url.UserPassword(role, password)
	return u.String(), password
}

// exec runs one statement on the maintenance database.
func (s *server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// start finds or starts a server.
func start() (*server, error) {
	if raw := os.Getenv(EnvURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		s := &server{admin: raw, base: u}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.exec(ctx, "SELECT 1"); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		return s, nil
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	return startCluster(bin)
}

// findBinaries returns the directory of initdb and postgres: on PATH, or
// the newest version under Debian's /usr/lib/postgresql/*/bin (which the
// postgresql package does not put on PATH).
func findBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if target, err := filepath.EvalSymlinks(p); err == nil {
			dir = filepath.Dir(target)
		}
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range append(dirs, "/usr/local/pgsql/bin") {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres) found on PATH or under /usr/lib/postgresql")
}

// version is the major version in a /usr/lib/postgresql/N/bin path.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// startCluster creates a cluster in a new temporary directory and starts
// its server on a Unix socket there. As root, both run as the postgres
// system user, since PostgreSQL refuses to run as root.
func startCluster(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "svcgw-pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and no postgres system user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// Every role but the members of passwordGroup is trusted; those
	// must give their password (see PasswordDSN).
	hba := filepath.Join(data, "pg_hba.conf")
	trusted, err := os.ReadFile(hba)
	if err == nil {
		err = os.WriteFile(hba, append([]byte("local all +"+passwordGroup+" scram-sha-256\n"), trusted...), 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_hba.conf: %w", err)
	}
	// No TCP: the server listens on a socket in dir only, so clusters of
	// test binaries running at once never meet. Durability is off: the
	// cluster is thrown away.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "port=5432", "-c", "max_connections=300",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB", "-c", "log_min_messages=fatal")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	u := &url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {dir}, "port": {"5432"}, "sslmode": {"disable"}}.Encode()}
	s := &server{admin: u.String(), base: u, dir: dir, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.exec(ctx, "SELECT 1")
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			s.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres did not start: %v: %s", err, strings.TrimSpace(string(log)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop shuts the server down at once and removes its directory.
func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
