// Package logtext is a slog.Handler that writes exactly what slog's
// TextHandler writes, faster for the common line.
//
// svcgw writes one access line per request (13 attributes, strings,
// integers and a bool); through slog.TextHandler that line was ~4% of a
// non-streaming call's CPU at saturation. Handler formats a record whose
// attributes are all of the plain kinds (string, integers, float, bool,
// duration, time) itself, into a pooled buffer, with no ReplaceAttr and no
// source; anything else (groups, values of kind Any such as errors,
// LogValuers, handlers derived by WithAttrs or WithGroup, either option set)
// goes to a slog.TextHandler on the same writer. The bytes are the same
// either way: the tests hold every line to the TextHandler's.
package logtext

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Handler is a slog.Handler with slog.TextHandler's output. Lines from its
// own path and from the TextHandler it falls back to are written whole,
// one Write each, under one lock.
type Handler struct {
	text *slog.TextHandler
	w    io.Writer
	mu   *sync.Mutex
	fast bool // no ReplaceAttr, no AddSource: the records Handle formats itself
}

// NewHandler returns a handler writing to w with opts, as
// slog.NewTextHandler(w, opts) would.
func NewHandler(w io.Writer, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	mu := &sync.Mutex{}
	return &Handler{
		text: slog.NewTextHandler(&lockedWriter{mu: mu, w: w}, opts),
		w:    w,
		mu:   mu,
		fast: opts.ReplaceAttr == nil && !opts.AddSource,
	}
}

// lockedWriter serializes the TextHandler's writes with Handler's own.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// Enabled reports whether level is at least the options' level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.text.Enabled(ctx, level)
}

// WithAttrs returns the TextHandler's: derived loggers are rare in svcgw
// and not on a request's path.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.text.WithAttrs(attrs)
}

// WithGroup returns the TextHandler's, as WithAttrs does.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.text.WithGroup(name)
}

// maxPooled is the largest buffer put back in the pool: a line with a
// huge attribute does not keep its buffer alive.
const maxPooled = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle writes r's line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.fast {
		return h.text.Handle(ctx, r)
	}
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooled {
			bufPool.Put(bp)
		}
	}()
	b, ok := appendRecord((*bp)[:0], r)
	*bp = b
	if !ok {
		return h.text.Handle(ctx, r)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

// HandleAttrs writes the line Handle writes for a record of t, level, msg
// and attrs (with no program counter), without building the record: a
// record holds five attributes in place and allocates for the rest.
func (h *Handler) HandleAttrs(ctx context.Context, t time.Time, level slog.Level, msg string, attrs ...slog.Attr) error {
	if h.fast {
		bp := bufPool.Get().(*[]byte)
		defer func() {
			if cap(*bp) <= maxPooled {
				bufPool.Put(bp)
			}
		}()
		b, ok := appendHead((*bp)[:0], t, level, msg), true
		for _, a := range attrs {
			if b, ok = appendAttr(b, a); !ok {
				break
			}
		}
		*bp = b
		if ok {
			*bp = append(b, '\n')
			h.mu.Lock()
			defer h.mu.Unlock()
			_, err := h.w.Write(*bp)
			return err
		}
	}
	r := slog.NewRecord(t, level, msg, 0)
	r.AddAttrs(attrs...)
	return h.text.Handle(ctx, r)
}

// appendRecord appends r's line as slog.TextHandler formats it with no
// options, and reports false (leaving b's contents undefined) when an
// attribute is of a kind it leaves to the TextHandler.
func appendRecord(b []byte, r slog.Record) ([]byte, bool) {
	b = appendHead(b, r.Time, r.Level, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		b, ok = appendAttr(b, a)
		return ok
	})
	return append(b, '\n'), ok
}

// appendHead appends a line's time, level and message.
func appendHead(b []byte, t time.Time, level slog.Level, msg string) []byte {
	if !t.IsZero() {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t.Round(0))
		b = append(b, ' ')
	}
	b = append(b, "level="...)
	b = appendString(b, level.String())
	b = append(b, " msg="...)
	return appendString(b, msg)
}

// appendAttr appends one attribute, and reports false (leaving b's
// contents undefined) when it is of a kind left to the TextHandler.
func appendAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" {
		return b, false // elided when the value is empty too: the TextHandler decides
	}
	b = append(b, ' ')
	b = appendString(b, a.Key)
	b = append(b, '=')
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		b = appendString(b, v.String())
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		b = strconv.AppendFloat(b, v.Float64(), 'g', -1, 64)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		b = append(b, v.Duration().String()...)
	case slog.KindTime:
		b = appendRFC3339Millis(b, v.Time())
	default: // Any (errors among them), LogValuer, Group
		return b, false
	}
	return b, true
}

// appendRFC3339Millis is slog's: RFC 3339 with exactly three fractional
// digits, truncated.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the 4th digit
}

// appendString appends s bare, or quoted by strconv when the TextHandler
// would quote it.
func appendString(b []byte, s string) []byte {
	if !needsQuoting(s) {
		return append(b, s...)
	}
	// strconv.AppendQuote escapes only '"' and '\\' of printable ASCII:
	// a string of nothing else (a route with its space) is quoted here
	// without its rune-by-rune walk.
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			return strconv.AppendQuote(b, s)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// needsQuoting is slog's rule: empty strings, and strings with a space,
// '=', '"', a control character, invalid UTF-8 or an unprintable rune
// are quoted.
func needsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !bareSet[c] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// bareSet is the ASCII bytes that need no quoting, one lookup a byte:
// safeSet without ' ' and '=', and with '\\' (slog leaves a backslash bare).
var bareSet = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c == '\\' || c != ' ' && c != '=' && safeSet[c]
	}
	return t
}()

// safeSet is slog's table of the ASCII bytes a string may hold bare: from
// ' ' up, DEL included, but not '"' or '\\'.
var safeSet = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
