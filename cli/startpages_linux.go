package cli

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseStartPages unmaps from the process the pages of its own
// executable that start-up read, once serve is ready: what stays resident
// of the binary is then what serving touches again. Starting reads far
// more of it than serving does (package initialisation, kong's parser,
// the configuration's YAML, opening and migrating the database, x509 and
// pgx registrations, and each first call's stack walks through the
// function tables), and the kernel maps file pages 64 KiB around each one
// touched, so after start 19–20 MiB of svcgw's RSS are its own file
// (bench/RESULTS.md, "The peak of (d): the binary's pages and the
// memory profiler"). Dropping the mapping is
// madvise(MADV_DONTNEED) over the executable's read-only mappings (its
// code, and its read-only data and function tables): those pages are
// the file's own pages, so nothing is lost; they stay in the page cache,
// and a page used again is mapped back by a minor fault (~1 µs, with the
// 64 KiB around it). A mapping holding a page copied on write (a
// debugger's breakpoint written into the code: smaps counts it as
// Anonymous) is left alone, as are the writable data sections.
//
// It returns the bytes of the mappings advised and what was resident in
// them; 0, 0 when /proc is not there.
func releaseStartPages() (advised, resident uint64) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, 0
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, 0
	}
	for _, m := range exeReadOnlyMappings(smaps, exe) {
		if m.anonymous != 0 {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, m.lo, m.hi-m.lo, syscall.MADV_DONTNEED); e == 0 {
			advised += uint64(m.hi - m.lo)
			resident += m.rss
		}
	}
	return advised, resident
}

// mapping is one entry of /proc/PID/smaps.
type mapping struct {
	lo, hi         uintptr
	rss, anonymous uint64 // bytes; anonymous: pages copied on write
}

// exeReadOnlyMappings parses smaps for the mappings of the file exe that
// are not writable.
func exeReadOnlyMappings(smaps []byte, exe string) []mapping {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		// A mapping's first line: "lo-hi perms offset dev inode [path]";
		// its fields' lines: "Name:   value kB".
		if addr, rest, ok := strings.Cut(line, " "); ok && strings.Contains(addr, "-") && !strings.HasSuffix(addr, ":") {
			cur = nil
			perms, path, fields := "", rest, 0
			for ; fields < 4; fields++ { // perms, offset, device, inode
				f, tail, ok := strings.Cut(strings.TrimLeft(path, " "), " ")
				if !ok {
					break
				}
				if fields == 0 {
					perms = f
				}
				path = tail
			}
			// The path is everything after the inode: it may hold spaces.
			if fields < 4 || strings.Contains(perms, "w") || strings.TrimSpace(path) != exe {
				continue
			}
			lo, hi, _ := strings.Cut(addr, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || h <= l {
				continue
			}
			out = append(out, mapping{lo: uintptr(l), hi: uintptr(h)})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil {
			continue
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch name {
		case "Rss":
			dst = &cur.rss
		case "Anonymous":
			dst = &cur.anonymous
		default:
			continue
		}
		if kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64); err == nil {
			*dst = kb << 10
		}
	}
	return out
}
