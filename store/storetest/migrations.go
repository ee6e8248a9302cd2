package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/svcgw/svcgw/store"
)

// CheckAppendOnly fails t unless ms, an engine's migrations (in its
// directory dir), are the shipped ones (each a name and the SHA-256 of its
// file, in the list shipped of the engine's migrations_test.go),
// unchanged and in order, followed by new ones. Migrations are append-only: a
// database that has applied one never runs it again, so an edit to a
// shipped file would reach new databases only, and theirs and the old
// ones' schemas would part.
func CheckAppendOnly(t *testing.T, dir string, ms []store.Migration, shipped [][2]string) {
	t.Helper()
	for i, m := range ms {
		sum := sha256.Sum256([]byte(m.SQL))
		got := hex.EncodeToString(sum[:])
		switch {
		case i >= len(shipped):
			t.Errorf("%s/%s.sql is new: pin it by adding\n\t{%q, %q},\nto shipped in its migrations_test.go", dir, m.Name, m.Name, got)
		case m.Name != shipped[i][0]:
			t.Errorf("migration %d is %s/%s.sql, but %s shipped in its place: shipped migrations are never renamed, removed or reordered, and a new one goes after %s",
				i+1, dir, m.Name, shipped[i][0], shipped[len(shipped)-1][0])
			return // every one after it is out of place too
		case got != shipped[i][1]:
			t.Errorf("%s/%s.sql has changed since it shipped (sha256 %s, shipped %s): databases that applied it will not run it again; restore it and make the change in a new migration",
				dir, m.Name, got, shipped[i][1])
		}
	}
	for _, s := range shipped[min(len(ms), len(shipped)):] {
		t.Errorf("%s/%s.sql shipped and is gone: restore it", dir, s[0])
	}
}
