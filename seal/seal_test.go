package seal

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/matryer/is"
)

func key(id byte, fill byte) Key { return Key{ID: id, Secret: bytes.Repeat([]byte{fill}, KeySize)} }

func TestBox_SealOpen(t *testing.T) {
	is := is.New(t)
	b, err := New([]Key{key(1, 1)})
	is.NoErr(err)
	tok := b.Seal("message", []byte("Hello"))
	is.Equal(len(tok), len(base64.RawURLEncoding.EncodeToString(make([]byte, 1+24+16+5)))) // key id, nonce, tag: 55 characters over the payload
	pt, err := b.Open("message", tok)
	is.NoErr(err)
	is.Equal(string(pt), "Hello")
	is.True(b.Seal("message", []byte("Hello")) != tok) // a fresh nonce every time
}

func TestBox_OpenRefuses(t *testing.T) {
	b, _ := New([]Key{key(1, 1)})
	other, _ := New([]Key{key(1, 2)})
	tok := b.Seal("message", []byte("Hello"))
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)-1] ^= 1
	unknownKey := append([]byte(nil), raw...)
	unknownKey[0] = 9
	for name, tc := range map[string]struct {
		box            *Box
		purpose, token string
	}{
		"another purpose":   {b, "reasoning", tok},
		"another key":       {other, "message", tok},
		"a flipped bit":     {b, "message", base64.RawURLEncoding.EncodeToString(flipped)},
		"an unknown key id": {b, "message", base64.RawURLEncoding.EncodeToString(unknownKey)},
		"truncated":         {b, "message", tok[:20]},
		"not base64":        {b, "message", "msg_!!"},
		"empty":             {b, "message", ""},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			_, err := tc.box.Open(tc.purpose, tc.token)
			is.Equal(err, ErrOpen)
		})
	}
}

func TestBox_Rotation(t *testing.T) {
	is := is.New(t)
	old, _ := New([]Key{key(1, 1)})
	tok := old.Seal("p", []byte("x"))
	rotated, err := New([]Key{key(1, 1), key(2, 2)})
	is.NoErr(err)
	pt, err := rotated.Open("p", tok)
	is.NoErr(err) // tokens of the older key still open
	is.Equal(string(pt), "x")
	raw, _ := base64.RawURLEncoding.DecodeString(rotated.Seal("p", []byte("x")))
	is.Equal(raw[0], byte(2)) // the newest key seals
}

func TestNew_Errors(t *testing.T) {
	is := is.New(t)
	_, err := New(nil)
	is.True(err != nil) // no key
	_, err = New([]Key{key(0, 1)})
	is.True(err != nil) // id 0
	_, err = New([]Key{key(1, 1), key(1, 2)})
	is.True(err != nil) // twice
	_, err = New([]Key{{ID: 1, Secret: []byte("short")}})
	is.True(err != nil) // bad size
}
