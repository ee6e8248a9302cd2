package sqlite

import (
	"testing"

	"github.com/svcgw/svcgw/store/storetest"
)

// shipped are the migrations as released, in order, each with the SHA-256
// of its file. Migrations are append-only: a database that has applied one
// never runs it again, so an edit to a shipped file would reach new
// databases only, and theirs and the old ones' schemas would part. A schema
// change is a new file, pinned here (its line is in the failure) when it
// is added.
var shipped = [][2]string{
	{"0001_init", "3f38ec8f20f8fb19c76de1868d3e3ec80361be5435b7cf0545323f40c613b160"},
	{"0002_seal_keys", "537b11edde65caded45eecd8bb68309662dafd87e947f32847c92a53bbaacf95"},
	{"0003_usage_rollups", "80a16604290ceae54730b17de11263f5ef671ff49f89456bc21fdfe4ce92568f"},
	{"0004_spend_daily_covering", "fa4fd116a76143dc2b338fc4b6ab30be6c7bf7835ed5f56b45751b9ce7a36a32"},
	{"0005_generations_filter_indexes", "5ea86a60baabb87b7703637ea14cf1b24e50ad06bf18da7d3e326249eec6ad0e"},
	{"0006_key_changes", "9d254672dd3c9f110bd9b785b9b5b344512578500b49d5da2407ac304eafbb9b"},
	{"0007_usage_periods_checks", "87d57b813abf17ff4f177587dcbff32dd0f52bc1bd70736e86f0b09b3bd78f12"},
	{"0008_output_items", "d2f33df7d2d5108152098f21c54de6ac7f51a60187be8b31d1ecfc1d5c433b26"},
	{"0009_control_plane", "13c10b858e68ac3b424cb1ccad01a07db86e18ab23cb5cd46f01544eff4835a9"},
	{"0010_account_rate_limits", "3efcbcfd904715e80fd09c527f5a5f7a00590a7d633ca6442251f4b1b2beebbe"},
}

func TestMigrations_AppendOnly(t *testing.T) {
	ms, err := sqliteMigrations()
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckAppendOnly(t, "store/sqlite/migrations", ms, shipped)
}
