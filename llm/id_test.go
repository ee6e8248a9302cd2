package llm

import (
	"sort"
	"strings"
	"testing"
	"time"
)

func TestNewID_SortsByCreationAndIsUnique(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var ids []string
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := newIDAt("chatcmpl-", 24, base.Add(time.Duration(i)*time.Millisecond))
		if !strings.HasPrefix(id, "chatcmpl-") || len(id) != len("chatcmpl-")+24 {
			t.Fatalf("bad id %q", id)
		}
		for _, c := range id[len("chatcmpl-"):] {
			if !strings.ContainsRune(idAlphabet, c) {
				t.Fatalf("id %q has %q outside base62", id, c)
			}
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids created later do not sort later")
	}
	// Ids of the same millisecond differ in their random part.
	a, b := newIDAt("msg_", 24, base), newIDAt("msg_", 24, base)
	if a == b || a[:4+idTimeChars] != b[:4+idTimeChars] {
		t.Fatalf("same-millisecond ids %q and %q", a, b)
	}
}

func TestIDTime(t *testing.T) {
	at := time.Date(2025, 3, 10, 12, 30, 15, 250*int(time.Millisecond), time.UTC)
	tests := []struct {
		name, id, prefix string
		want             time.Time
		ok               bool
	}{
		{"chat id", NewIDAt("chatcmpl-", 24, at), "chatcmpl-", at, true},
		{"prefix without separator", NewIDAt("gw", 22, at), "gw", at, true},
		{"the epoch", NewIDAt("msg_", 24, time.UnixMilli(0)), "msg_", time.UnixMilli(0).UTC(), true},
		{"another prefix", NewIDAt("msg_", 24, at), "resp_", time.Time{}, false},
		{"too short", "msg_0abc", "msg_", time.Time{}, false},
		{"not base62", "msg_0abc-def1234567", "msg_", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := IDTime(tt.id, tt.prefix)
			if ok != tt.ok || !got.Equal(tt.want) {
				t.Errorf("IDTime(%q, %q) = %v, %v; want %v, %v", tt.id, tt.prefix, got, ok, tt.want, tt.ok)
			}
		})
	}
}
