package cli

import (
	"os"
	"testing"
)

func TestExeReadOnlyMappings(t *testing.T) {
	const exe = "/opt/svc gw/svcgw"
	smaps := `00400000-00f29000 r-xp 00000000 fd:01 1   /opt/svc gw/svcgw
Size:              11428 kB
Rss:                9412 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00f29000-01ac1000 r--p 00b29000 fd:01 1   /opt/svc gw/svcgw
Rss:                8000 kB
Private_Dirty:         8 kB
Anonymous:             8 kB
01ac1000-01b70000 rw-p 016c1000 fd:01 1   /opt/svc gw/svcgw
Rss:                 500 kB
Private_Dirty:       100 kB
01b70000-01c00000 r--p 00000000 fd:01 2   /opt/svc gw/svcgw.old
Rss:                 100 kB
7f0000000000-7f0000010000 rw-p 00000000 00:00 0 
Rss:                  64 kB
7ffd000000-7ffd001000 r-xp 00000000 00:00 0                  [vdso]
Rss:                   4 kB
`
	got := exeReadOnlyMappings([]byte(smaps), exe)
	want := []mapping{
		{lo: 0x400000, hi: 0xf29000, rss: 9412 << 10},
		{lo: 0xf29000, hi: 0x1ac1000, rss: 8000 << 10, anonymous: 8 << 10},
	}
	if len(got) != len(want) {
		t.Fatalf("mappings = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestReleaseStartPages releases the test binary's own pages: what is
// resident of its read-only mappings falls, and the code keeps running
// (each page it needs again faults back in).
func TestReleaseStartPages(t *testing.T) {
	rss := func() (total uint64) {
		exe, err := os.Readlink("/proc/self/exe")
		if err != nil {
			t.Fatal(err)
		}
		smaps, err := os.ReadFile("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range exeReadOnlyMappings(smaps, exe) {
			total += m.rss
		}
		return total
	}
	before := rss()
	if before == 0 {
		t.Fatal("no resident page of the executable's read-only mappings found in /proc/self/smaps")
	}
	advised, resident := releaseStartPages()
	after := rss()
	t.Logf("before %d KiB, advised %d KiB (%d KiB resident), after %d KiB", before>>10, advised>>10, resident>>10, after>>10)
	if advised == 0 || resident == 0 {
		t.Fatalf("advised %d bytes, %d resident: nothing released", advised, resident)
	}
	if after >= before/2 {
		t.Errorf("resident pages of the executable: %d KiB before, %d KiB after release", before>>10, after>>10)
	}
}
