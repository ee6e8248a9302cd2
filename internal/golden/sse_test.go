package golden

import (
	"reflect"
	"testing"
)

// recorder is a testing.TB whose Fatalf ends the check under test and is
// recorded, so that the test can see CheckSSE fail.
type recorder struct {
	testing.TB
	failed bool
}

type fatal struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	panic(fatal{})
}

// fails reports whether check fails the test it is given.
func fails(t *testing.T, check func(testing.TB)) (failed bool) {
	r := &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
		failed = r.failed
	}()
	check(r)
	return false
}

func TestCheckSSE(t *testing.T) {
	frames := func(fs ...string) [][]byte {
		out := make([][]byte, len(fs))
		for i, f := range fs {
			out[i] = []byte(f)
		}
		return out
	}
	cases := []struct {
		name   string
		frames [][]byte
		bare   bool
		fails  bool
	}{
		{"named and unnamed events", frames("event: a\ndata: {}\n\n", "data: [DONE]\n\n"), false, false},
		{"a bare error line last", frames("data: {}\n\n", "{\"error\":{}}\n"), true, false},
		{"a bare line where none is allowed", frames("{\"error\":{}}\n"), false, true},
		{"no blank line", frames("data: a\n", "data: b\n\n"), false, true},
		{"two data lines", frames("data: a\ndata: b\n\n"), false, true},
		{"a CR in the data", frames("data: a\rb\n\n"), false, true},
		{"a comment", frames(": hi\n\n"), false, true},
		{"a bare line that is not JSON", frames("{oops\n"), true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fails(t, func(tb testing.TB) { CheckSSE(tb, c.frames, c.bare) }); got != c.fails {
				t.Errorf("CheckSSE failed: %v, want %v", got, c.fails)
			}
		})
	}
}

func TestSplitFrames(t *testing.T) {
	got := SplitFrames([]byte("data: a\n\nevent: e\ndata: b\n\n{\"error\":{}}\n"))
	want := [][]byte{[]byte("data: a\n\n"), []byte("event: e\ndata: b\n\n"), []byte("{\"error\":{}}\n")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SplitFrames = %q, want %q", got, want)
	}
}
