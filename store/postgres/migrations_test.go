package postgres

import (
	"testing"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// shipped are the migrations as released, in order, each with the SHA-256
// of its file (see storetest.CheckAppendOnly). A schema change is a new
// file, pinned here (its line is in the failure) when it is added.
var shipped = [][2]string{
	{"0001_init", "73b63662688a28fd53b473b28a25e18ec66b86a774186a17ff6c06b48a7d35dd"},
	{"0002_generations_filter_indexes", "ea8344243380dc38580005ccc59f66855119b8c75ac31b4a04526e8ae07803d4"},
	{"0003_key_changes", "38f90163c9711a06708bada4f6005d3b0d514bfc9328e345f8969c7a2678a7f6"},
	{"0004_generations_references", "f05cea1890dddf64ca75a5eade6094a87accf7455143633b791d274861cad11d"},
	{"0005_instance_locks", "6c6234decdcb5bff5fa176a7f532f3e30663178a257119e08580e6f859f9c284"},
	{"0006_output_items", "9e4a7f21160cf3de4914d5ac184b005dea911de88f4c296ba440a313f8eee6c0"},
	{"0007_control_plane", "87d429dedbaf7552ca0b6acee2916cc34393ffa578dd8aa2e7e7d873824f1b1b"},
	{"0008_account_rate_limits", "49e62cf83c4d6080c14b102e0bd0a7b872394f20b6980a9d7b20f061c4cd3bbc"},
}

func TestMigrations_AppendOnly(t *testing.T) {
	ms, err := store.LoadMigrations(pgMigrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckAppendOnly(t, "store/postgres/migrations", ms, shipped)
}
