package cli

import (
	"errors"
	"fmt"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
	"io/fs"
	"os"
)

type initCmd struct{}

// Run creates the database at --db with svcgw's schema and nothing in it;
// on an existing one it only applies pending migrations. serve bootstraps
// the default account only on a database with no accounts, so keys created
// after init are the only ones.
//
// On PostgreSQL the database itself must exist (CREATE DATABASE is the
// server administrator's); init creates svcgw's tables in it.
func (c *initCmd) Run(e *env) error {
	if postgres.IsDSN(e.global.DB) {
		st, err := e.createStore(store.Options{})
		if err != nil {
			return err
		}
		if err := st.Close(); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "%s: svcgw's schema is in place and up to date\n", e.global.where())
		return nil
	}
	_, err := os.Stat(e.global.DB)
	existed := !errors.Is(err, fs.ErrNotExist)
	st, err := e.createStore(store.Options{})
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	if existed {
		fmt.Fprintf(e.stderr, "%s already exists; its schema is up to date\n", e.global.DB)
		return nil
	}
	fmt.Fprintf(e.stderr, "created %s\n", e.global.DB)
	return nil
}
