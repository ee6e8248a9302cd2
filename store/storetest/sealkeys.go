package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/matryer/is"
)

func testStore_SealKeys(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := newTestDB(t, open)
	keys, err := s.SealKeys(ctx)
	is.NoErr(err)
	is.Equal(len(keys), 1) // the first key, made on first use
	is.Equal(keys[0].ID, byte(1))
	is.Equal(len(keys[0].Secret), 32)
	is.True(!bytes.Equal(keys[0].Secret, make([]byte, 32))) // random

	again, err := s.SealKeys(ctx)
	is.NoErr(err)
	is.Equal(again, keys) // stable: every instance on the database gets the same

	// A rotated-in key is returned too; the highest id seals.
	Exec(t, s, `INSERT INTO seal_keys (id, secret, created_at) VALUES (2, ?, 0)`, bytes.Repeat([]byte{7}, 32))
	rotated, err := s.SealKeys(ctx)
	is.NoErr(err)
	is.Equal(len(rotated), 2)
	is.Equal(rotated[1].ID, byte(2))
}
