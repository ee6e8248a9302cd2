package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
)

// dbCmd groups the commands that move a ledger between databases.
type dbCmd struct {
	Copy dbCopyCmd `cmd:"" help:"Copy a SQLite ledger into an empty PostgreSQL database, then verify the copy."`
}

type dbCopyCmd struct {
	From string `name:"from" required:"" type:"existingfile" help:"The SQLite database to copy (svcgw serve must not be serving it)."`
	To   string `name:"to" required:"" help:"The PostgreSQL database to copy into (a postgres:// URL); it must hold no svcgw data."`
}

// Run copies every table and prints, for each, the rows and sums compared
// in the source and the copy. A mismatch fails the command.
func (c *dbCopyCmd) Run(e *env) error {
	if !postgres.IsDSN(c.To) {
		return fmt.Errorf("--to %s: want a postgres:// or postgresql:// URL", c.To)
	}
	res, err := postgres.CopyFromSQLite(e.ctx, c.From, c.To, nil)
	if len(res.Checks) > 0 {
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tFIGURE\tSQLITE\tPOSTGRESQL\t")
		for _, ch := range res.Checks {
			mark := "ok"
			if !ch.OK() {
				mark = "MISMATCH"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", ch.Table, ch.What, ch.Source, ch.Dest, mark)
		}
		tw.Flush()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "copied %s to %s in %s; every figure matches\n", c.From, store.Redact(c.To), res.Took.Round(time.Millisecond))
	return nil
}
