// Package seal is svcgw's authenticated encryption of the opaque tokens it
// hands callers and takes back later: Responses API output item ids that
// carry their item (so that an item_reference resolves without the gateway
// storing anything) and reasoning signatures (so that no vendor bytes reach a
// caller). A token opens only under the key that sealed it and for the
// purpose it was sealed for; anything else, tampered with or foreign, fails.
//
// Tokens are XChaCha20-Poly1305 (golang.org/x/crypto): its 192-bit random
// nonces need no coordination between instances sealing under one key, at
// no bound on the number of tokens a key seals that would matter. A token is
// one byte naming the key, the nonce, and the ciphertext with its tag, in
// unpadded base64url: 55 characters more than what it seals.
//
// Keys are numbered 1–255. The highest-numbered key seals; every key opens,
// so a key is rotated by adding one with a higher number and retired once
// no token sealed under it is still in use. Every instance that shares a
// database shares its keys (store.SealKeys).
//
// seal imports nothing of svcgw's.
package seal

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeySize is the size of a key's secret.
const KeySize = chacha20poly1305.KeySize

// Key is one sealing key.
type Key struct {
	ID     byte // 1–255
	Secret []byte
}

// ErrOpen is returned for a token that does not open: not one of ours, sealed
// for another purpose, or altered.
var ErrOpen = errors.New("seal: token does not open")

// Box seals and opens tokens. It is safe for concurrent use.
type Box struct {
	current byte
	aeads   [256]cipher.AEAD
}

// New returns a box over keys, which must hold at least one.
func New(keys []Key) (*Box, error) {
	b := &Box{}
	for _, k := range keys {
		if k.ID == 0 {
			return nil, errors.New("seal: key id 0 is reserved")
		}
		if b.aeads[k.ID] != nil {
			return nil, fmt.Errorf("seal: key %d given twice", k.ID)
		}
		a, err := chacha20poly1305.NewX(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", k.ID, err)
		}
		b.aeads[k.ID] = a
		b.current = max(b.current, k.ID)
	}
	if b.current == 0 {
		return nil, errors.New("seal: no key")
	}
	return b, nil
}

// NewEphemeral returns a box over one fresh random key: tokens it seals
// open only in this process. For tests and tools that share no database.
func NewEphemeral() *Box {
	secret := make([]byte, KeySize)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	b, _ := New([]Key{{ID: 1, Secret: secret}})
	return b
}

// Seal returns plaintext sealed for purpose, as unpadded base64url. The
// purpose is authenticated, not carried: Open must name the same one.
func (b *Box) Seal(purpose string, plaintext []byte) string {
	a := b.aeads[b.current]
	ns := a.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+a.Overhead())
	out[0] = b.current
	_, _ = rand.Read(out[1 : 1+ns])
	out = a.Seal(out, out[1:1+ns], plaintext, []byte(purpose))
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open returns the plaintext of a token sealed for purpose, or ErrOpen.
func (b *Box) Open(purpose, token string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) == 0 {
		return nil, ErrOpen
	}
	a := b.aeads[raw[0]]
	if a == nil || len(raw) < 1+a.NonceSize()+a.Overhead() {
		return nil, ErrOpen
	}
	ns := a.NonceSize()
	pt, err := a.Open(nil, raw[1:1+ns], raw[1+ns:], []byte(purpose))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
