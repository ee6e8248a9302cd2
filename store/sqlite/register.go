package sqlite

import (
	"context"

	"github.com/svcgw/svcgw/store"
)

func init() { store.Register("sqlite", IsDSN, dial) }

// IsDSN reports whether dsn names a SQLite database: a file path, that is
// anything but a URL (scheme://...).
func IsDSN(dsn string) bool { return !store.IsURL(dsn) }

func dial(ctx context.Context, dsn string, opts store.Options) (store.DB, error) {
	s, err := Open(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

var (
	_ store.DB     = (*Store)(nil)
	_ store.Engine = (*Store)(nil)
)
