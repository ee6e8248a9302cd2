package store

import (
	"crypto/rand"
	"testing"

	"github.com/matryer/is"
)

func TestNewSecret_Uniform(t *testing.T) {
	is := is.New(t)
	counts := map[rune]int{}
	for range 500 {
		sec, err := newSecret(rand.Reader)
		is.NoErr(err) // secret
		for _, r := range sec[len(SecretPrefix):] {
			counts[r]++
		}
	}
	is.Equal(len(counts), 62) // every base62 character appears
	for r, n := range counts {
		// 20000 draws over 62 symbols: about 323 each.
		if n < 200 || n > 450 {
			t.Errorf("character %q drawn %d times", r, n)
		}
	}
}
