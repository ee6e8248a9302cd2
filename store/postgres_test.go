package store

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
)

func TestOpenPostgres_InstancesStartingAtOnceMigrateOnce(t *testing.T) {
	is := is.New(t)
	dsn := pgtest.DSN(t)
	const n = 6
	var (
		wg   sync.WaitGroup
		errs = make([]error, n)
		dbs  = make([]*Postgres, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = OpenPostgres(context.Background(), dsn, Options{})
		}()
	}
	wg.Wait()
	for i := range n {
		is.NoErr(errs[i]) // every instance opens
		defer dbs[i].Close()
	}
	ms, err := loadMigrations(pgMigrationFiles, "pgmigrations")
	is.NoErr(err)
	is.Equal(queryInt(t, dbs[0], `SELECT COUNT(*) FROM schema_migrations`), int64(len(ms))) // each migration recorded once
	// They agree on the sealing keys, made once by whichever came first.
	first, err := dbs[0].SealKeys(context.Background())
	is.NoErr(err)
	for _, db := range dbs[1:] {
		keys, err := db.SealKeys(context.Background())
		is.NoErr(err)
		is.Equal(keys, first) // one set of sealing keys
	}
}

func TestOpenPostgres_RefusesNewerSchemaAndBadURLs(t *testing.T) {
	is := is.New(t)
	dsn := pgtest.DSN(t)
	p := openTestPostgres(t, dsn, Options{})
	execSQL(t, p, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', 0)`)
	_, err := OpenPostgres(context.Background(), dsn, Options{})
	is.True(err != nil && strings.Contains(err.Error(), "newer than this build")) // a newer schema is refused

	_, err = OpenPostgres(context.Background(), "postgres://u:secret@/x?host=/nonexistent&connect_timeout=1", Options{})
	is.True(err != nil)                               // no server
	is.True(!strings.Contains(err.Error(), "secret")) // the password never shows
}

func TestDial_PicksTheEngineByScheme(t *testing.T) {
	is := is.New(t)
	for dsn, pg := range map[string]bool{
		"svcgw.db": false, "/var/lib/svcgw/svcgw.db": false, "postgres://h/db": true,
		"postgresql://u@h:5432/db?sslmode=disable": true, "POSTGRES://h/db": true, "mysql://h/db": false,
	} {
		is.Equal(IsPostgres(dsn), pg) // scheme decides
	}
	is.Equal(Redact("postgres://u:pw@h/db"), "postgres://u:xxxxx@h/db")
	is.Equal(Redact("postgres://u@h/db?password=pw&sslmode=disable"), "postgres://u@h/db?password=xxxxx&sslmode=disable")
	is.Equal(Redact("postgres://u@h/db?sslmode=verify-full&sslkey=k.pem&sslpassword=kp"), "postgres://u@h/db?sslkey=k.pem&sslmode=verify-full&sslpassword=xxxxx")
	is.Equal(Redact("svcgw.db"), "svcgw.db")
}

// The writer's connections use generic plans (its statements take arrays
// and would otherwise be planned at every commit); the readers' keep
// PostgreSQL's default, and a DSN's own setting wins.
func TestOpenPostgres_WriterUsesGenericPlans(t *testing.T) {
	is := is.New(t)
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	mode := func(pool interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var m string
		is.NoErr(pool.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&m))
		return m
	}
	p := openTestPostgres(t, dsn, Options{})
	is.Equal(mode(p.w), "force_generic_plan") // the writer
	is.Equal(mode(p.r), "auto")               // account reads
	is.Equal(mode(p.call), "auto")            // the call path

	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	own := openTestPostgres(t, dsn+sep+"plan_cache_mode=force_custom_plan", Options{})
	is.Equal(mode(own.w), "force_custom_plan") // the DSN's setting kept
}
