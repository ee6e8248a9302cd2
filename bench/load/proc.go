//go:build bench

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports (the kernel exports it fixed, so
// user space may rely on it).
const clockTick = 10 * time.Millisecond

// procCPU returns the user plus system CPU time the process has used
// (proc(5): fields 14 and 15 of /proc/PID/stat).
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state), so utime (14) is f[11] and stime (15) f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, nil
}

// procStatusKB returns one "kB" field of /proc/PID/status, such as VmRSS or
// VmHWM (the peak resident set size).
func procStatusKB(pid int, field string) (int64, error) {
	kb, err := procStatusKBs(pid, field)
	if err != nil {
		return 0, err
	}
	return kb[0], nil
}

// procStatusKBs returns several "kB" fields of /proc/PID/status from one
// read of it, in the order asked.
func procStatusKBs(pid int, fields ...string) ([]int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	kb := make([]int64, len(fields))
	found := 0
	for _, line := range strings.Split(string(raw), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		i := slices.Index(fields, name)
		if i < 0 {
			continue
		}
		val = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(val), "kB"))
		if kb[i], err = strconv.ParseInt(val, 10, 64); err != nil {
			return nil, err
		}
		found++
	}
	if found < len(fields) {
		return nil, fmt.Errorf("/proc/%d/status lacks one of %v", pid, fields)
	}
	return kb, nil
}

// resetPeakRSS resets the process's VmHWM to its current RSS (proc(5):
// writing 5 to /proc/PID/clear_refs), so that the peak read after a
// scenario is that scenario's own.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// coreTicks returns the busy and total ticks of one core from /proc/stat
// (busy: everything but idle and iowait).
func coreTicks(core int) (busy, total uint64, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	prefix := fmt.Sprintf("cpu%d ", core)
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)[1:]
		for i, v := range f {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("parse /proc/stat %s: %w", prefix, err)
			}
			// guest and guest_nice (fields 9, 10) are already in user and nice.
			if i >= 8 {
				break
			}
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		return busy, total, nil
	}
	return 0, 0, fmt.Errorf("/proc/stat has no cpu%d", core)
}

// pinnedCore returns the one core a process may run on, or -1 when it may
// run on several (proc(5): Cpus_allowed_list).
func pinnedCore(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
			return -1
		}
	}
	return -1
}

// procWatch measures a target process over one scenario: CPU used, peak RSS
// (VmHWM, reset at the start), the largest VmRSS seen by sampling, and how
// busy its core was with other processes (the machine may be shared).
type procWatch struct {
	pid      int
	cpu0     time.Duration
	start    time.Time
	core     int // -1: not pinned to one
	busy0    uint64
	total0   uint64
	hwmReset bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// startRSSKB is the resident set when the scenario starts, before its
	// load: what the process holds whatever it serves.
	startRSSKB int64

	mu       sync.Mutex
	maxRSSKB int64
	// The anonymous and file-backed (the binary's pages, mostly) parts of
	// the largest sample.
	maxAnonKB, maxFileKB int64
	sampleErr            error
}

// startWatch begins measuring pid; pid 0 measures nothing.
func startWatch(pid int) (*procWatch, error) {
	w := &procWatch{pid: pid}
	if pid == 0 {
		return w, nil
	}
	w.hwmReset = resetPeakRSS(pid) == nil
	if kb, err := procStatusKB(pid, "VmRSS"); err == nil {
		w.startRSSKB = kb
	}
	cpu, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	w.cpu0 = cpu
	w.start = time.Now()
	w.core = pinnedCore(pid)
	if w.core >= 0 {
		if w.busy0, w.total0, err = coreTicks(w.core); err != nil {
			w.core = -1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			kb, err := procStatusKBs(pid, "VmRSS", "RssAnon", "RssFile")
			w.mu.Lock()
			if err != nil && w.sampleErr == nil {
				w.sampleErr = err
			}
			if err == nil && kb[0] > w.maxRSSKB {
				w.maxRSSKB, w.maxAnonKB, w.maxFileKB = kb[0], kb[1], kb[2]
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w, nil
}

// stop ends the measurement and fills r's process fields; requests is the
// number of calls the CPU time is divided by.
func (w *procWatch) stop(r *Result, requests int64) error {
	if w.pid == 0 {
		return nil
	}
	w.cancel()
	w.wg.Wait()
	cpu, err := procCPU(w.pid)
	if err != nil {
		return err
	}
	hwm, err := procStatusKB(w.pid, "VmHWM")
	if err != nil {
		return err
	}
	r.CPUSeconds = (cpu - w.cpu0).Seconds()
	if requests > 0 {
		r.CPUPerCallMicros = (cpu - w.cpu0).Seconds() * 1e6 / float64(requests)
	}
	r.TargetCore = w.core
	if wall := time.Since(w.start); wall > 0 {
		r.TargetCPUPct = 100 * (cpu - w.cpu0).Seconds() / wall.Seconds()
	}
	if w.core >= 0 {
		if busy, total, err := coreTicks(w.core); err == nil && total > w.total0 {
			r.CoreBusyPct = 100 * float64(busy-w.busy0) / float64(total-w.total0)
			r.OthersOnCorePct = max(0, r.CoreBusyPct-r.TargetCPUPct)
		}
	}
	r.PeakRSSMiB = float64(hwm) / 1024
	r.PeakRSSIsLifetime = !w.hwmReset
	w.mu.Lock()
	r.MaxSampledRSSMiB = float64(w.maxRSSKB) / 1024
	r.MaxSampledAnonMiB = float64(w.maxAnonKB) / 1024
	r.MaxSampledFileMiB = float64(w.maxFileKB) / 1024
	w.mu.Unlock()
	r.StartRSSMiB = float64(w.startRSSKB) / 1024
	return nil
}
