package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestConformance runs the engine contract's suite on SQLite, each test on
// a new file.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "svcgw.db")
		return func(t testing.TB, opts store.Options) store.DB { return openTestStore(t, path, opts) }
	})
}
