package postgres

import (
	"context"
	"strings"

	"github.com/svcgw/svcgw/store"
)

func init() { store.Register("postgres", IsDSN, dial) }

// IsDSN reports whether dsn names a PostgreSQL database: a URL with the
// postgres:// or postgresql:// scheme.
func IsDSN(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

func dial(ctx context.Context, dsn string, opts store.Options) (store.DB, error) {
	p, err := Open(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	return p, nil
}

var (
	_ store.DB     = (*Store)(nil)
	_ store.Engine = (*Store)(nil)
)
