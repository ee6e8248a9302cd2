package account_test

import (
	"encoding/json"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/account"
)

// usageEnv records four acme generations around midnight of March 10–11
// 2025 and one of beta's, and returns the env.
func usageEnv(t *testing.T) *env {
	e := newEnv(t)
	at := func(d, h, m, s, ms int) time.Time {
		return time.Date(2025, 3, d, h, m, s, ms*int(time.Millisecond), time.UTC)
	}
	gen := func(id string, k store.Key, app, typ string, micros int64) store.Generation {
		return store.Generation{
			ID: id, AccountID: k.AccountID, KeyID: k.ID, Application: app, RequestType: typ,
			PromptTokens: 100, CompletionTokens: 20, CachedPromptTokens: 40, Cost: money.Micros(micros),
		}
	}
	e.record(t, at(10, 12, 0, 0, 0), gen("g1", e.acme, "alpha", "code", 100_000))
	e.record(t, at(10, 23, 59, 59, 999), gen("g2", e.acme2, "beta", "pro", 200_000))
	e.record(t, at(11, 0, 0, 0, 0), gen("g3", e.acme, "alpha", "vision", 300_000))
	e.record(t, at(12, 8, 0, 0, 0), gen("g4", e.acme2, "beta", "code", 400_001))
	e.record(t, at(11, 9, 0, 0, 0), gen("x1", e.beta, "alpha", "code", 5_000_000))
	return e
}

func TestUsage(t *testing.T) {
	e := usageEnv(t)
	keys := []string{e.acme.ID, e.acme2.ID}
	sort.Strings(keys)
	keyCost := map[string]string{e.acme.ID: "0.400000", e.acme2.ID: "0.600001"}

	// b renders the expected bucket with n requests of the fixed token mix.
	b := func(bucket string, n int, cost string) string {
		out, _ := json.Marshal(map[string]any{
			"bucket": bucket, "requests": n, "input_tokens": 100 * n, "output_tokens": 20 * n,
			"total_tokens": 120 * n, "cached_input_tokens": 40 * n, "cache_write_tokens": 0, "reasoning_tokens": 0,
			"cost": cost,
		})
		return string(out)
	}
	total := func(n int, cost string) string {
		out, _ := json.Marshal(map[string]any{
			"requests": n, "input_tokens": 100 * n, "output_tokens": 20 * n,
			"total_tokens": 120 * n, "cached_input_tokens": 40 * n, "cache_write_tokens": 0, "reasoning_tokens": 0,
			"cost": cost,
		})
		return string(out)
	}
	report := func(groupBy, start, end string, total string, buckets ...string) string {
		q := func(s string) string {
			if s == "" {
				return "null"
			}
			return `"` + s + `"`
		}
		return `{"object":"usage","group_by":"` + groupBy + `","start_date":` + q(start) + `,"end_date":` + q(end) +
			`,"data":[` + strings.Join(buckets, ",") + `],"total":` + total + `}`
	}

	tests := []struct {
		name  string
		query string
		want  string
	}{
		{"default groups by day", "",
			report("day", "", "", total(4, "1.000001"),
				b("2025-03-10", 2, "0.300000"), b("2025-03-11", 1, "0.300000"), b("2025-03-12", 1, "0.400001"))},
		{"request type", "group_by=request_type",
			report("request_type", "", "", total(4, "1.000001"),
				b("code", 2, "0.500001"), b("pro", 1, "0.200000"), b("vision", 1, "0.300000"))},
		{"application", "group_by=application",
			report("application", "", "", total(4, "1.000001"),
				b("alpha", 2, "0.400000"), b("beta", 2, "0.600001"))},
		{"api key", "group_by=api_key",
			report("api_key", "", "", total(4, "1.000001"),
				b(keys[0], 2, keyCost[keys[0]]), b(keys[1], 2, keyCost[keys[1]]))},
		{"date-only start is inclusive", "start_date=2025-03-11",
			report("day", "2025-03-11T00:00:00Z", "", total(2, "0.700001"),
				b("2025-03-11", 1, "0.300000"), b("2025-03-12", 1, "0.400001"))},
		{"date-only end includes the whole day", "end_date=2025-03-10",
			report("day", "", "2025-03-11T00:00:00Z", total(2, "0.300000"),
				b("2025-03-10", 2, "0.300000"))},
		{"date-only start and end on one day", "group_by=application&start_date=2025-03-11&end_date=2025-03-11",
			report("application", "2025-03-11T00:00:00Z", "2025-03-12T00:00:00Z", total(1, "0.300000"),
				b("alpha", 1, "0.300000"))},
		{"RFC 3339 end is exclusive", "end_date=2025-03-11T00:00:00Z",
			report("day", "", "2025-03-11T00:00:00Z", total(2, "0.300000"),
				b("2025-03-10", 2, "0.300000"))},
		{"RFC 3339 with an offset", "group_by=request_type&start_date=2025-03-11T02:00:00%2B02:00&end_date=2025-03-12T00:00:00Z",
			report("request_type", "2025-03-11T00:00:00Z", "2025-03-12T00:00:00Z", total(1, "0.300000"),
				b("vision", 1, "0.300000"))},
		{"the widest dates there are", "group_by=request_type&start_date=0001-01-01&end_date=9999-12-31",
			report("request_type", "", "9999-12-31T23:59:59.999999999Z", total(4, "1.000001"), // 0001-01-01 is the zero time: unbounded
				b("code", 2, "0.500001"), b("pro", 1, "0.200000"), b("vision", 1, "0.300000"))},
		{"empty window", "start_date=2025-04-01",
			report("day", "2025-04-01T00:00:00Z", "", total(0, "0.000000"))},
		// The far ends are echoed as RFC 3339 can write them, never as
		// 10000-01-01T00:00:00Z or a negative year.
		{"the last day there is", "group_by=request_type&start_date=2025-03-11&end_date=9999-12-31",
			report("request_type", "2025-03-11T00:00:00Z", "9999-12-31T23:59:59.999999999Z", total(2, "0.700001"),
				b("code", 1, "0.400001"), b("vision", 1, "0.300000"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?"+tt.query, "", e.acme)
			is.Equal(status, 200)              // usage
			is.Equal(body, jsonOf(t, tt.want)) // report
		})
	}

	t.Run("another account sees only its own", func(t *testing.T) {
		is := is.New(t)
		status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?group_by=application", "", e.beta)
		is.Equal(status, 200) // usage
		is.Equal(body, jsonOf(t, report("application", "", "", total(1, "5.000000"), b("alpha", 1, "5.000000"))))
	})

	t.Run("empty data is an array", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		e.h.Usage(rec, httptest.NewRequest("GET", "/svc/v1/usage?end_date=2025-01-01", nil), e.acme)
		is.Equal(rec.Code, 200)                                   // usage
		is.True(strings.Contains(rec.Body.String(), `"data":[]`)) // never null
	})
}

// A start equal to an exclusive RFC 3339 end is an empty range, not a
// bad one: the answer is no data, never a 400. (A date-only end includes
// its day, so the same date on both sides is that one day.)
func TestUsage_EmptyRangeIsNotAnError(t *testing.T) {
	e := usageEnv(t)
	for _, q := range []string{
		"start_date=2025-03-10T00:00:00Z&end_date=2025-03-10T00:00:00Z",
		"group_by=api_key&start_date=2025-03-10&end_date=2025-03-10T00:00:00Z",
	} {
		t.Run(q, func(t *testing.T) {
			is := is.New(t)
			rec := httptest.NewRecorder()
			e.h.Usage(rec, httptest.NewRequest("GET", "/svc/v1/usage?"+q, nil), e.acme)
			is.Equal(rec.Code, 200)                                   // an empty range is valid
			is.True(strings.Contains(rec.Body.String(), `"data":[]`)) // and holds nothing
		})
	}
	is := is.New(t)
	uq, err := account.ParseUsageQuery("day", "2025-03-10T00:00:00Z", "2025-03-10T00:00:00Z")
	is.NoErr(err)                   // parses
	is.True(uq.Start.Equal(uq.End)) // as the empty range it is
}

func TestUsage_BadQueries(t *testing.T) {
	e := usageEnv(t)
	tests := []struct {
		name, query, param string
	}{
		{"unknown group_by", "group_by=model", "group_by"},
		{"group_by is case-sensitive", "group_by=Day", "group_by"},
		{"impossible date", "start_date=2025-13-01", "start_date"},
		{"words", "start_date=yesterday", "start_date"},
		{"slashes", "end_date=2025/03/10", "end_date"},
		{"bad hour", "end_date=2025-03-10T25:00:00Z", "end_date"},
		{"no zone", "end_date=2025-03-10T10:00:00", "end_date"},
		{"start after end", "start_date=2025-03-12&end_date=2025-03-10", "start_date"},
		{"start after RFC 3339 end", "start_date=2025-03-11T00:00:00Z&end_date=2025-03-10T00:00:00Z", "start_date"},
		{"a start within a day", "start_date=2025-03-10T12:00:00Z", "start_date"},
		{"an end within a day", "end_date=2025-03-10T23:59:59.999Z", "end_date"},
		{"a local midnight that is not UTC's", "end_date=2025-03-11T00:00:00%2B01:00", "end_date"},
		{"a semicolon is not dropped silently", "group_by=;DROP%20TABLE%20generations", "group_by"},
		{"a semicolon in a date", "start_date=2025-03-01;x", "start_date"},
		{"a bad escape", "group_by=day&end_date=%zz", "end_date"},
		{"group_by twice", "group_by=day&group_by=api_key", "group_by"},
		{"end_date twice", "end_date=2025-03-10&end_date=2025-03-11", "end_date"},
		{"five-digit year", "end_date=10000-01-01", "end_date"},
		{"a zone offset past the first day", "start_date=0000-01-01T00:00:00%2B01:00", "start_date"},
		{"a zone offset past the last day", "end_date=9999-12-31T23:00:00-05:00", "end_date"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?"+tt.query, "", e.acme)
			is.Equal(status, 400) // rejected
			kind, param := errorOf(t, body)
			is.Equal(kind, "invalid_request") // kind
			is.Equal(param, tt.param)         // offending parameter
		})
	}
}

func TestUsage_SubDayBoundSaysWhy(t *testing.T) {
	is := is.New(t)
	e := usageEnv(t)
	status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?start_date=2025-03-10T12:00:00%2B02:00", "", e.acme)
	is.Equal(status, 400) // a bound within a day
	msg := body["error"].(map[string]any)["message"].(string)
	is.Equal(msg, "start_date must be a date (YYYY-MM-DD) or a time at a UTC midnight such as 2025-03-10T00:00:00Z: "+
		"usage is kept per UTC day, so a bound within a day cannot be answered exactly.")
}
