package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgx/v5"

	"github.com/svcgw/svcgw/internal/logtext"
	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// BenchmarkPipeline_ChatStore is BenchmarkPipeline_Chat on each store, in
// one run: the ledger in SQLite, and in PostgreSQL (the suite's throwaway
// cluster) with admission from the instance's balance lease. The account
// is well funded, so a PostgreSQL call is admitted from the lease in
// memory; db-xacts/op is PostgreSQL's committed transactions per call
// (lease grants, heartbeats and ledger batches; pg_stat_database, which
// PostgreSQL updates within a second, so short runs undercount it).
func BenchmarkPipeline_ChatStore(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		benchStore(b, st, nil)
	})
	b.Run("postgres", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		st, err := postgres.Open(context.Background(), dsn, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close(context.Background()) })
		benchStore(b, st, conn)
	})
}

func benchStore(b *testing.B, st store.DB, pg *pgx.Conn) {
	ctx := context.Background()
	acct, _, err := st.EnsureAccount(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	secret, _, err := st.CreateKey(ctx, acct.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	amt, _, _ := apd.NewFromString("1000000")
	if _, err := st.AddCredits(ctx, acct.ID, *amt, "bench"); err != nil {
		b.Fatal(err)
	}
	h := New(Options{
		Logger: slog.New(logtext.NewHandler(io.Discard, nil)),
		Store:  st,
		Router: upstream.NewRouter([]upstream.Candidate{{Name: "fixture", Backend: fixture.New(fixture.Options{})}}),
	})
	xacts := func() int64 {
		if pg == nil {
			return 0
		}
		var n int64
		if _, err := pg.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Log(err)
		}
		if err := pg.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.ReportAllocs()
	before := xacts()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/svc/v1/chat/completions", strings.NewReader(benchChat))
			req.Header.Set("Authorization", "Bearer "+secret)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
	b.StopTimer()
	if err := st.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	if pg != nil {
		b.ReportMetric(float64(xacts()-before)/float64(b.N), "db-xacts/op")
	}
}
