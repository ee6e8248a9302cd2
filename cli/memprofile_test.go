package cli

import (
	"runtime"
	"sync"
	"testing"
)

// TestServe_MemoryProfilingOnlyWithAnAdminListener: a serve without an
// admin listener (nothing can read a heap profile) stops the runtime's
// memory profiling, unless GODEBUG names a rate; one with it keeps it.
// Not parallel: it resets the process's memory profiling around it.
func TestServe_MemoryProfilingOnlyWithAnAdminListener(t *testing.T) {
	prev := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate, memProfileOnce = prev, sync.Once{} })
	const rate = 512 << 10
	for _, tc := range []struct {
		name    string
		godebug string
		args    []string
		want    int
	}{
		{"no admin listener", "gctrace=0", nil, 0},
		{"no admin listener, GODEBUG names a rate", "gctrace=0, memprofilerate=524288", nil, rate},
		{"admin listener", "", []string{"--admin-addr", "127.0.0.1:0"}, rate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.MemProfileRate, memProfileOnce = rate, sync.Once{}
			t.Setenv("GODEBUG", tc.godebug)
			db := newDB(t)
			t.Run("serve", func(t *testing.T) { serve(t, db, tc.args...) }) // returns once serve has ended
			if runtime.MemProfileRate != tc.want {
				t.Errorf("MemProfileRate = %d, want %d", runtime.MemProfileRate, tc.want)
			}
		})
	}
}

func TestGodebugNames(t *testing.T) {
	for _, tc := range []struct {
		godebug string
		want    bool
	}{
		{"", false},
		{"memprofilerate=0", true},
		{"gctrace=1,memprofilerate=1", true},
		{"gctrace=1, memprofilerate=1", true},
		{"xmemprofilerate=1", false},
		{"memprofilerate", false},
	} {
		if got := godebugNames(tc.godebug, "memprofilerate"); got != tc.want {
			t.Errorf("godebugNames(%q) = %v, want %v", tc.godebug, got, tc.want)
		}
	}
}
