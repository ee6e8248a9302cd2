package llm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// limit is the largest announced size the tests' buffers are made for.
const limit = 4096

// TestReadAllSized: whatever Content-Length announced, the bytes and the
// error are io.ReadAll's, read in one piece, a byte at a time, or ending in
// an error with the last data.
func TestReadAllSized(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	errBroken := errors.New("connection reset")
	readers := map[string]func() io.Reader{
		"whole":     func() io.Reader { return strings.NewReader(body) },
		"bytewise":  func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"data+EOF":  func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		"broken":    func() io.Reader { return io.MultiReader(strings.NewReader(body), iotest.ErrReader(errBroken)) },
		"half":      func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) },
		"empty":     func() io.Reader { return strings.NewReader("") },
		"limitPast": func() io.Reader { return io.LimitReader(strings.NewReader(body), 500) },
	}
	for name, r := range readers {
		want, wantErr := io.ReadAll(r())
		for _, size := range []int64{-1, 0, 1, 499, 500, 999, 1000, 1001, 5000, limit + 1} {
			got, err := ReadAllSized(r(), size, limit)
			if !bytes.Equal(got, want) || !errors.Is(err, wantErr) && err != wantErr {
				t.Errorf("%s, size %d: %d bytes, %v; want %d bytes, %v", name, size, len(got), err, len(want), wantErr)
			}
		}
	}
}

// The announced size is allocated once: no growth for a reply of that size.
func TestReadAllSized_OneAllocation(t *testing.T) {
	body := strings.Repeat("x", 700)
	r := strings.NewReader(body)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if b, err := ReadAllSized(r, int64(len(body)), limit); err != nil || len(b) != len(body) {
			t.Fatal(len(b), err)
		}
	})
	if allocs != 1 {
		t.Errorf("%v allocations, want 1", allocs)
	}
}
