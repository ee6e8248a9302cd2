package protocol

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/upstream"
)

// TestRequestBody checks that an upstream request's body is sent whole
// with its length, can be rewound until the response begins, and is let
// go after that, but only once the transport has written it.
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

	h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL}, "", nil)
	c, resp, err := h.Post(t.Context(), srv.URL, http.Header{}, data)
	is.NoErr(err)
	resp.Body.Close()
	c.Release()
	is.Equal(got, data) // the server got the body whole

	// What post does, step by step.
	rb := &requestBody{b: data}
	body := rb.reader()
	req, err := http.NewRequestWithContext(
		httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: rb.wroteRequest}),
		http.MethodPost, srv.URL, body)
	is.NoErr(err)
	req.GetBody = rb.get
	again, err := req.GetBody()
	is.NoErr(err) // rewinds before the response
	b, err := io.ReadAll(again)
	is.NoErr(err)
	is.Equal(b, data)
	// Each reader GetBody hands out is read by one attempt to write the
	// request, which reports its end; here the test was that attempt.
	rb.wroteRequest(httptrace.WroteRequestInfo{})
	resp, err = sharedTransport().RoundTrip(req)
	is.NoErr(err)
	resp.Body.Close()
	rb.mu.Lock()
	is.Equal(rb.writes, 2) // the transport reported the request written
	rb.mu.Unlock()
	rb.release()
	is.Equal(body.Size(), int64(0)) // the transport's reader let go of the bytes
	_, err = req.GetBody()
	is.True(err != nil) // nothing to rewind once released

	// A request answered before the transport's writer was done with it
	// keeps its reader intact while the writer may still be reading it,
	// and lets go of the bytes when the writer reports that it is done.
	rb = &requestBody{b: data}
	body = rb.reader()
	rb.release()
	is.Equal(body.Size(), int64(len(data)))
	rb.wroteRequest(httptrace.WroteRequestInfo{})
	is.Equal(body.Size(), int64(0))
	_, err = rb.get()
	is.True(err != nil)

	// A request retried on another connection (nothing of it written on
	// the first) reads its body again from GetBody's reader: the end of the
	// first write does not let the second's reader go.
	rb = &requestBody{b: data}
	body = rb.reader()
	rb.wroteRequest(httptrace.WroteRequestInfo{Err: io.ErrUnexpectedEOF}) // the first attempt failed
	_, err = rb.get()
	is.NoErr(err)
	second := rb.readers[1]
	rb.release()                                  // the response to the second attempt came first
	is.Equal(second.Len(), len(data))             // its writer may still be reading
	rb.wroteRequest(httptrace.WroteRequestInfo{}) // the second write is over
	is.Equal(second.Len(), 0)
	is.Equal(body.Size(), int64(0))
}
