package logtext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// both writes r through slog's TextHandler and through Handler, with the
// same options, and returns the two outputs.
func both(t testing.TB, opts *slog.HandlerOptions, r slog.Record) (want, got string) {
	t.Helper()
	var wb, gb bytes.Buffer
	if err := slog.NewTextHandler(&wb, opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := NewHandler(&gb, opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	// HandleAttrs, given the record's parts, writes what Handle does.
	var ab bytes.Buffer
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	if err := NewHandler(&ab, opts).HandleAttrs(context.Background(), r.Time, r.Level, r.Message, attrs...); err != nil {
		t.Fatal(err)
	}
	if ab.String() != gb.String() {
		t.Errorf("HandleAttrs wrote\n%q\nHandle\n%q", ab.String(), gb.String())
	}
	return wb.String(), gb.String()
}

var when = time.Date(2026, 11, 24, 5, 22, 27, 123456789, time.FixedZone("X", 5*3600+30*60))

// awkward are strings slog quotes, or nearly does.
var awkward = []string{
	"", "plain", "two words", "a=b", `say "hi"`, `back\slash`, "line\nbreak", "tab\there", "cr\r",
	"\x00nul", "\x7fdel", "caf\u00e9", "\u00a0nbsp", "\u2028sep", "\u200bzw", "emoji \U0001F600", "\U0001F600",
	"\xff\xfe", "bad\xc3", "ok\xc3\xa9", "{json:1}", "[x]", "'q'", "-", "=", `"`, `\`, "req_0123abcd",
	"/svc/v1/chat/completions", "POST /svc/v1/chat/completions", "0.000123", strings.Repeat("long ", 400),
}

func TestHandler_SameBytesAsTextHandler(t *testing.T) {
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError,
		slog.LevelDebug - 3, slog.LevelInfo + 2, slog.LevelWarn + 1, slog.LevelError + 4, -100, 100}
	var values []slog.Value
	for _, s := range awkward {
		values = append(values, slog.StringValue(s))
	}
	values = append(values,
		slog.IntValue(0), slog.IntValue(-1), slog.Int64Value(math.MaxInt64), slog.Int64Value(math.MinInt64),
		slog.Uint64Value(math.MaxUint64), slog.Float64Value(0), slog.Float64Value(-1.5e-300),
		slog.Float64Value(math.Inf(1)), slog.Float64Value(math.NaN()), slog.Float64Value(123456789.125),
		slog.BoolValue(true), slog.BoolValue(false),
		slog.DurationValue(0), slog.DurationValue(1500*time.Millisecond), slog.DurationValue(-time.Nanosecond),
		slog.DurationValue(math.MaxInt64),
		slog.TimeValue(when), slog.TimeValue(time.Time{}), slog.TimeValue(when.UTC()),
		// Kinds left to the TextHandler:
		slog.AnyValue(errors.New("upstream: 502 \"bad gateway\"")), slog.AnyValue(fmt.Errorf("wrap: %w", errors.New("x=y"))),
		slog.AnyValue(nil), slog.AnyValue([]byte("bytes here")), slog.AnyValue(struct{ A int }{1}),
		slog.GroupValue(slog.String("a", "b c"), slog.Int("n", 1)), slog.GroupValue(),
	)
	keys := append([]string{"k", "request_id"}, awkward...)
	n := 0
	for _, tm := range []time.Time{when, time.Time{}, when.UTC(), time.Unix(0, 999_999_999)} {
		for _, lv := range levels {
			for i, msg := range awkward {
				r := slog.NewRecord(tm, lv, msg, 0)
				// A line of many attributes, keys and values rotating.
				for j := range 17 {
					r.AddAttrs(slog.Attr{Key: keys[(i+j)%len(keys)], Value: values[(i*7+j)%len(values)]})
				}
				want, got := both(t, nil, r)
				if got != want {
					t.Fatalf("record %d:\n got %q\nwant %q", n, got, want)
				}
				n++
			}
		}
	}
	// Each value alone under each key.
	for _, k := range keys {
		for _, v := range values {
			r := slog.NewRecord(when, slog.LevelInfo, "request", 0)
			r.AddAttrs(slog.Attr{Key: k, Value: v})
			if want, got := both(t, nil, r); got != want {
				t.Fatalf("%q=%v:\n got %q\nwant %q", k, v, got, want)
			}
		}
	}
}

// TestHandler_EveryASCIIByte checks the quoting rule byte by byte, alone
// and inside a word, in keys, values and messages.
func TestHandler_EveryASCIIByte(t *testing.T) {
	for c := range 256 {
		for _, s := range []string{string(rune(c)), string([]byte{byte(c)}), "a" + string([]byte{byte(c)}) + "b"} {
			r := slog.NewRecord(when, slog.LevelInfo, s, 0)
			r.AddAttrs(slog.String(s, s), slog.String("k", s))
			if want, got := both(t, nil, r); got != want {
				t.Fatalf("byte %#x:\n got %q\nwant %q", c, got, want)
			}
		}
	}
}

// TestHandler_Options covers what goes to the TextHandler: options,
// attributes of other kinds, derived handlers, the empty attribute, and
// the level filter.
func TestHandler_Options(t *testing.T) {
	r := slog.NewRecord(when, slog.LevelWarn, "request", 0)
	r.AddAttrs(slog.String("route", "POST /x"), slog.Int("status", 429), slog.Any("err", errors.New("boom")), slog.Attr{})
	for name, opts := range map[string]*slog.HandlerOptions{
		"nil":     nil,
		"level":   {Level: slog.LevelError},
		"source":  {AddSource: true},
		"replace": {ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { a.Key = strings.ToUpper(a.Key); return a }},
	} {
		if want, got := both(t, opts, r); got != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
		var wb, gb bytes.Buffer
		wl, gl := slog.New(slog.NewTextHandler(&wb, opts)), slog.New(NewHandler(&gb, opts))
		for _, l := range []*slog.Logger{wl, gl} {
			l.Debug("debug line", "a", 1)
			l.Info("info line", "a", "b c")
			l.Warn("warn line", "d", time.Second)
			l.Error("error line", "err", errors.New("e f"), "n", 2)
			l.With("x", "y z").Info("with", "a", 1)
			l.WithGroup("g").Info("group", "a", 1)
			l.WithGroup("g").With().Info("group none")
			l.With().WithGroup("").Info("neither", "a", slog.GroupValue(slog.Int("b", 2)))
			l.LogAttrs(context.Background(), slog.LevelInfo, "empty", slog.Attr{}, slog.String("", "v"), slog.Int("z", 0))
		}
		// Times differ between the two loggers' lines: compare without them.
		if strip(gb.String()) != strip(wb.String()) {
			t.Errorf("%s, through a Logger:\n got %s\nwant %s", name, gb.String(), wb.String())
		}
	}
}

// strip removes the time attribute of each line (time=, or TIME= where
// ReplaceAttr upper-cases the keys).
func strip(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.ToLower(l), "time=") {
			_, l, _ = strings.Cut(l, " ")
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// TestHandler_WholeLines writes from many goroutines through both paths
// (the TextHandler's for lines with an error) and checks no line is torn.
func TestHandler_WholeLines(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewHandler(&buf, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if i%2 == 0 {
					l.Info("fast", "g", g, "i", i, "pad", strings.Repeat("x", 100))
				} else {
					l.Info("slow", "g", g, "i", i, "err", errors.New(strings.Repeat("y", 100)))
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, line := range lines {
		if !strings.HasSuffix(line, strings.Repeat("x", 100)) && !strings.HasSuffix(line, strings.Repeat("y", 100)) {
			t.Fatalf("torn line %q", line)
		}
	}
}

// FuzzHandler holds lines built from arbitrary strings, integers and a
// level to the TextHandler's bytes.
func FuzzHandler(f *testing.F) {
	for i, s := range awkward {
		f.Add(s, awkward[(i+1)%len(awkward)], int64(i)*-7919, int8(i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, key, val string, n int64, level int8, kinds uint8) {
		r := slog.NewRecord(when.Add(time.Duration(n)), slog.Level(level), val, 0)
		r.AddAttrs(slog.String("request_id", val), slog.String(key, val))
		for i := range 8 {
			k := key + digit(i)
			switch (int(kinds) >> i) & 3 {
			case 0:
				r.AddAttrs(slog.String(k, val+key))
			case 1:
				r.AddAttrs(slog.Int64(k, n>>i))
			case 2:
				r.AddAttrs(slog.Duration(k, time.Duration(n)), slog.Bool(k, n%2 == 0))
			case 3:
				r.AddAttrs(slog.Float64(k, float64(n)/float64(i+1)), slog.Time(k, time.Unix(0, n)))
			}
		}
		if want, got := both(t, nil, r); got != want {
			t.Fatalf("\n got %q\nwant %q", got, want)
		}
	})
}

func digit(i int) string { return string(rune('0' + i)) }

func BenchmarkAccessLine(b *testing.B) {
	attrs := []slog.Attr{
		slog.String("request_id", "req_0123456789abcdef01234567"),
		slog.String("route", "POST /svc/v1/chat/completions"),
		slog.String("surface", "chat"),
		slog.String("request_type", "flash"),
		slog.String("key_id", "key_0123456789ab"),
		slog.String("backend", "mock"),
		slog.Int("attempts", 1),
		slog.Int("status", 200),
		slog.Int("input_tokens", 12),
		slog.Int("output_tokens", 16),
		slog.String("cost", "0.000043"),
		slog.Int("duration_ms", 0),
		slog.Bool("canceled", false),
	}
	for _, h := range []struct {
		name string
		h    slog.Handler
	}{{"slog", slog.NewTextHandler(discard{}, nil)}, {"logtext", NewHandler(discard{}, nil)}} {
		b.Run(h.name, func(b *testing.B) {
			l := slog.New(h.h)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
