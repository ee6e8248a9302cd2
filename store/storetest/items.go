package storetest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

// A call's output items are kept with its record: found by id for its own
// account only, at once (the lookup commits what the ledger holds), and
// deleted with the record by retention.
func testOutputItems_KeptWithTheRecord(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	db, clock := newTestDB(t, open)
	ada, _, err := db.EnsureAccount(ctx, "ada")
	is.NoErr(err)
	bob, _, err := db.EnsureAccount(ctx, "bob")
	is.NoErr(err)

	old := clock.Now()
	db.RecordGeneration(store.Generation{ID: "resp_old", AccountID: ada.ID, Surface: "responses", Model: "m",
		RequestType: "pro", Tier: "standard", Streamed: true, FinishReason: "stop", CreatedAt: old,
		Items: []store.Item{{ID: "msg_resp_old_0", Data: []byte(`{"t":["old"]}`)}}})
	clock.Advance(48 * time.Hour)
	db.RecordGeneration(store.Generation{ID: "resp_new", AccountID: ada.ID, Surface: "responses", Model: "m",
		RequestType: "pro", Tier: "standard", Streamed: true, FinishReason: "stop", CreatedAt: clock.Now(),
		Items: []store.Item{
			{ID: "rs_resp_new_0", Data: []byte(`{"t":["thinking"],"s":"sig"}`)},
			{ID: "msg_resp_new_1", Data: []byte(`{"t":["Hello"]}`)},
		}})

	// No Sync first: the lookup commits what is pending itself.
	got, err := db.OutputItems(ctx, ada.ID, []string{"rs_resp_new_0", "msg_resp_new_1", "msg_resp_old_0", "msg_nowhere_0"})
	is.NoErr(err)
	is.Equal(len(got), 3)
	is.Equal(string(got["msg_resp_new_1"]), `{"t":["Hello"]}`)
	is.Equal(string(got["rs_resp_new_0"]), `{"t":["thinking"],"s":"sig"}`)
	_, found := got["msg_nowhere_0"]
	is.True(!found)

	// Another account's items are not this one's.
	got, err = db.OutputItems(ctx, bob.ID, []string{"msg_resp_new_1"})
	is.NoErr(err)
	is.Equal(len(got), 0)

	// Retention deletes an item with its record.
	pr, ok := db.(store.Pruner)
	is.True(ok)
	p := &store.Pacer{Target: time.Millisecond, Size: 100}
	is.NoErr(store.PrunePass(ctx, pr, clock.Now, 24*time.Hour, p, slog.New(slog.DiscardHandler)))
	got, err = db.OutputItems(ctx, ada.ID, []string{"msg_resp_old_0", "msg_resp_new_1"})
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.True(got["msg_resp_new_1"] != nil)
}
