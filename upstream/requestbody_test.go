package upstream

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/matryer/is"
)

// TestRequestBody checks that an upstream request's body is sent whole,
// can be rewound until the response begins, and is let go after that.
func TestRequestBody(t *testing.T) {
	is := is.New(t)
	data := bytes.Repeat([]byte(`{"role":"user","content":"lorem ipsum"},`), 1000)

	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		is.Equal(r.ContentLength, int64(len(data))) // sent with its length, not chunked
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	h := newHTTPClient(HTTPOptions{BaseURL: srv.URL}, "", nil)
	c, resp, err := h.post(t.Context(), srv.URL, http.Header{}, data)
	is.NoErr(err)
	resp.Body.Close()
	c.release()
	is.Equal(got, data) // the server got the body whole

	rb := &requestBody{b: data}
	first := rb.reader()
	b, err := io.ReadAll(first)
	is.NoErr(err)
	is.Equal(b, data)
	is.True(first.r == nil) // a reader lets go of the bytes at their end
	again, err := rb.get()
	is.NoErr(err) // rewound before the response
	b, err = io.ReadAll(again)
	is.NoErr(err)
	is.Equal(b, data)
	rb.release()
	is.True(rb.b == nil)
	_, err = rb.get()
	is.True(err != nil) // nothing to rewind once released

	// The transport may close the body while its writer still reads it.
	rb = &requestBody{b: data}
	r := rb.reader()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(io.Discard, r) })
	wg.Go(func() { _ = r.Close() })
	wg.Wait()
	n, err := r.Read(make([]byte, 10))
	is.Equal(n, 0)
	is.Equal(err, io.EOF) // closed
}
