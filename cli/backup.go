package cli

import (
	"fmt"
	"time"

	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/store/sqlite"
)

type backupCmd struct {
	File    string `arg:"" type:"path" help:"Where to write the copy. It must not exist: a backup never replaces a file."`
	NoCheck bool   `name:"no-check" help:"Skip PRAGMA integrity_check of the copy (it reads the whole copy once)."`
}

// Run copies the database named by --db to File while it may be serving:
// sqlite.Backup, SQLite's VACUUM INTO in one read transaction. It never
// creates or migrates the database it copies.
//
// backup is SQLite's alone: a PostgreSQL database is backed up with the
// server's own tools (pg_dump, or continuous archiving), which see every
// instance's writes; svcgw does not reimplement them.
func (c *backupCmd) Run(e *env) error {
	if postgres.IsDSN(e.global.DB) {
		return fmt.Errorf("backup copies a SQLite database; %s is PostgreSQL: back it up with pg_dump (pg_dump -Fc -f svcgw.dump '<url>') or the server's continuous archiving", e.global.where())
	}
	if err := checkDir(c.File, "backup"); err != nil {
		return err
	}
	res, err := sqlite.Backup(e.ctx, e.global.DB, c.File, c.NoCheck)
	if err != nil {
		return err
	}
	check := "integrity_check ok"
	if !res.Checked {
		check = "not checked"
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %.1f MB in %s, %s\n",
		e.global.DB, c.File, float64(res.Bytes)/1e6, res.Took.Round(time.Millisecond), check)
	return nil
}
