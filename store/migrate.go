package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one embedded migration file, named NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations returns the migrations NNNN_name.sql of dir in fsys, in
// version order.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var list []Migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		list = append(list, Migration{Version: version, Name: strings.TrimSuffix(base, ".sql"), SQL: string(body)})
	}
	if len(list) == 0 {
		return nil, errors.New("no migrations embedded")
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Version < list[j].Version })
	for i := 1; i < len(list); i++ {
		if list[i].Version == list[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", list[i-1].Name, list[i].Name)
		}
	}
	return list, nil
}

// Migrator is what migrate needs of an engine: a transaction for each
// migration.
type Migrator interface {
	// BeginMigration begins one migration's transaction, holding what
	// keeps other processes from migrating at the same time (SQLite's
	// write lock, a PostgreSQL advisory lock), with the table
	// schema_migrations created if it was not.
	BeginMigration(ctx context.Context) (MigrationTx, error)
}

// MigrationTx is one migration's transaction. Its queries are written with
// ? placeholders.
type MigrationTx interface {
	QueryInt(ctx context.Context, q string, args ...any) (int64, error)
	Exec(ctx context.Context, q string, args ...any) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context)
}

// Migrate applies every migration of ms not yet recorded in
// schema_migrations, each in its own transaction. Migrations only go
// forward: a database migrated by a newer svcgw is refused rather than
// half understood.
func Migrate(ctx context.Context, db Migrator, ms []Migration, now func() time.Time, log *slog.Logger) error {
	latest := ms[len(ms)-1].Version
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, latest, now, log); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration runs m unless it is already recorded. The check is inside
// the migration's transaction, so two processes migrating the same
// database at once cannot both apply it.
func applyMigration(ctx context.Context, db Migrator, m Migration, latest int, now func() time.Time, log *slog.Logger) error {
	tx, err := db.BeginMigration(ctx)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer tx.Rollback(ctx)
	newest, err := tx.QueryInt(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if newest > int64(latest) {
		return fmt.Errorf("database schema version %d is newer than this build's %d", newest, latest)
	}
	n, err := tx.QueryInt(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version)
	if err != nil {
		return fmt.Errorf("migration %s: check: %w", m.Name, err)
	}
	if n > 0 {
		return nil
	}
	done := func() {}
	if _, slow := slowMigrations[m.Name]; slow {
		generations, err := tx.QueryInt(ctx, `SELECT COUNT(*) FROM generations`)
		if err != nil {
			return fmt.Errorf("migration %s: count generations: %w", m.Name, err)
		}
		done = announceMigration(log, m.Name, generations)
	}
	if err := tx.Exec(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	done()
	if err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, Millis(now())); err != nil {
		return fmt.Errorf("migration %s: record: %w", m.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return nil
}

// slowMigrations are the migrations of either engine whose time grows with
// the ledger (an index on generations), by name, with what they build:
// before one runs, a line says so and on how many generations, since it
// holds the writer (on SQLite the write lock, on PostgreSQL writes to
// generations) before svcgw serves; another says when it is done.
var slowMigrations = map[string]string{
	// docs/ledger-scale.md: about 5 s of CPU per million generations on SQLite.
	"0005_generations_filter_indexes": "the generations' indexes by application and by request type",
	"0002_generations_filter_indexes": "the generations' indexes by application and by request type",
}

// announceMigration logs that the slow migration name starts, on a ledger
// of generations, and returns what logs that it is done. On a ledger
// without generations (a new database) it is not slow: nothing is said.
func announceMigration(log *slog.Logger, name string, generations int64) (done func()) {
	if generations == 0 {
		return func() {}
	}
	log.Info("store: migrating the ledger before serving; this holds its writer until done",
		"migration", name, "builds", slowMigrations[name], "generations", generations)
	began := time.Now()
	return func() {
		log.Info("store: migrated the ledger", "migration", name, "took", time.Since(began).Round(time.Millisecond))
	}
}
