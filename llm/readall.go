package llm

import "io"

// ReadAllSized is io.ReadAll starting from a buffer of size+1 bytes when
// size, a body's announced length, is known and at most limit (the byte
// past it lets the read that finds EOF land without growing the buffer):
// one allocation instead of a buffer grown from 512 bytes. A size of 0 is
// taken as unknown (a RoundTripper may leave ContentLength unset), and a
// size past limit is not allocated: the reader's own limit refuses such a
// body, and io.ReadAll reaches it without allocating what was claimed. The
// server reads requests with it and the upstream clients replies.
func ReadAllSized(r io.Reader, size, limit int64) ([]byte, error) {
	if size <= 0 || size > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // a body longer than announced: grow as io.ReadAll does
		}
	}
}
