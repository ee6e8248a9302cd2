package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestHashSecret: SHA-256 in lowercase hex, for secrets of every length up
// to past the stack buffer, in one allocation for a secret svcgw issues.
func TestHashSecret(t *testing.T) {
	for n := range 300 {
		s := strings.Repeat("k", n)
		sum := sha256.Sum256([]byte(s))
		if got, want := hashSecret(s), hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("%d bytes: %s, want %s", n, got, want)
		}
	}
	secret := SecretPrefix + strings.Repeat("A", 40)
	if a := testing.AllocsPerRun(100, func() { _ = hashSecret(secret) }); a != 1 {
		t.Errorf("%v allocations, want 1", a)
	}
}
