package store

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// shipped are the migrations as released, in order, each with the SHA-256
// of its file. Migrations are append-only: a database that has applied one
// never runs it again, so an edit to a shipped file would reach new
// databases only, and theirs and the old ones' schemas would part. A schema
// change is a new file, pinned here (its line is in the failure) when it
// is added.
var shipped = []struct{ name, sha256 string }{
	{"0001_init", "3f38ec8f20f8fb19c76de1868d3e3ec80361be5435b7cf0545323f40c613b160"},
	{"0002_seal_keys", "537b11edde65caded45eecd8bb68309662dafd87e947f32847c92a53bbaacf95"},
	{"0003_usage_rollups", "80a16604290ceae54730b17de11263f5ef671ff49f89456bc21fdfe4ce92568f"},
	{"0004_spend_daily_covering", "fa4fd116a76143dc2b338fc4b6ab30be6c7bf7835ed5f56b45751b9ce7a36a32"},
	{"0005_generations_filter_indexes", "5ea86a60baabb87b7703637ea14cf1b24e50ad06bf18da7d3e326249eec6ad0e"},
	{"0006_key_changes", "9d254672dd3c9f110bd9b785b9b5b344512578500b49d5da2407ac304eafbb9b"},
	{"0007_usage_periods_checks", "87d57b813abf17ff4f177587dcbff32dd0f52bc1bd70736e86f0b09b3bd78f12"},
	{"0008_output_items", "d2f33df7d2d5108152098f21c54de6ac7f51a60187be8b31d1ecfc1d5c433b26"},
	{"0009_control_plane", "13c10b858e68ac3b424cb1ccad01a07db86e18ab23cb5cd46f01544eff4835a9"},
}

// shippedPG are PostgreSQL's (store/pgmigrations), pinned the same way.
var shippedPG = []struct{ name, sha256 string }{
	{"0001_init", "73b63662688a28fd53b473b28a25e18ec66b86a774186a17ff6c06b48a7d35dd"},
	{"0002_generations_filter_indexes", "ea8344243380dc38580005ccc59f66855119b8c75ac31b4a04526e8ae07803d4"},
	{"0003_key_changes", "38f90163c9711a06708bada4f6005d3b0d514bfc9328e345f8969c7a2678a7f6"},
	{"0004_generations_references", "f05cea1890dddf64ca75a5eade6094a87accf7455143633b791d274861cad11d"},
	{"0005_instance_locks", "6c6234decdcb5bff5fa176a7f532f3e30663178a257119e08580e6f859f9c284"},
	{"0006_output_items", "9e4a7f21160cf3de4914d5ac184b005dea911de88f4c296ba440a313f8eee6c0"},
	{"0007_control_plane", "87d429dedbaf7552ca0b6acee2916cc34393ffa578dd8aa2e7e7d873824f1b1b"},
}

func TestMigrations_AppendOnly(t *testing.T) {
	ms, err := sqliteMigrations()
	if err != nil {
		t.Fatal(err)
	}
	checkAppendOnly(t, "migrations", "shipped", ms, shipped)
	pg, err := loadMigrations(pgMigrationFiles, "pgmigrations")
	if err != nil {
		t.Fatal(err)
	}
	checkAppendOnly(t, "pgmigrations", "shippedPG", pg, shippedPG)
}

func checkAppendOnly(t *testing.T, dir, list string, ms []migration, shipped []struct{ name, sha256 string }) {
	t.Helper()
	for i, m := range ms {
		sum := sha256.Sum256([]byte(m.sql))
		got := hex.EncodeToString(sum[:])
		switch {
		case i >= len(shipped):
			t.Errorf("%s/%s.sql is new: pin it by adding\n\t{%q, %q},\nto %s in store/migrations_test.go", dir, m.name, m.name, got, list)
		case m.name != shipped[i].name:
			t.Errorf("migration %d is %s/%s.sql, but %s shipped in its place: shipped migrations are never renamed, removed or reordered, and a new one goes after %s",
				i+1, dir, m.name, shipped[i].name, shipped[len(shipped)-1].name)
			return // every one after it is out of place too
		case got != shipped[i].sha256:
			t.Errorf("%s/%s.sql has changed since it shipped (sha256 %s, shipped %s): databases that applied it will not run it again; restore it and make the change in a new migration",
				dir, m.name, got, shipped[i].sha256)
		}
	}
	for _, s := range shipped[min(len(ms), len(shipped)):] {
		t.Errorf("%s/%s.sql shipped and is gone: restore it", dir, s.name)
	}
}
