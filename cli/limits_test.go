package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

func TestCLI_CreditsCap(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	run(t, db, "keys", "create", "--account", "acme")

	code, out, stderr := run(t, db, "credits", "cap", "--account", "acme", "--daily", "5", "--monthly", "100.50")
	is.Equal(code, 0) // credits cap
	is.True(strings.Contains(stderr, "daily cap 5.000000, monthly cap 100.500000"))
	is.True(strings.Contains(out, "DAILY CAP")) // the table follows

	show := func() map[string]any {
		t.Helper()
		code, out, stderr := run(t, db, "credits", "show", "--account", "acme", "--json")
		if code != 0 {
			t.Fatalf("credits show: %s", stderr)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("credits show --json: %v: %s", err, out)
		}
		return v
	}
	v := show()
	is.Equal(v["daily_cap"], "5.000000")
	is.Equal(v["monthly_cap"], "100.500000")
	is.Equal(v["spend_today"], "0.000000")      // GET /svc/v1/credits's name
	is.Equal(v["spend_this_month"], "0.000000") // likewise
	_, other := v["spent_today"]
	is.True(!other)                    // one name for one thing
	is.Equal(v["balance"], "0.000000") // the API's fields are still there

	code, _, _ = run(t, db, "credits", "cap", "--account", "acme", "--daily", "none")
	is.Equal(code, 0) // clear one cap
	v = show()
	is.Equal(v["daily_cap"], nil)            // cleared
	is.Equal(v["monthly_cap"], "100.500000") // the other kept
	code, _, _ = run(t, db, "credits", "cap", "--account", "acme", "--monthly", "0")
	is.Equal(code, 0) // zero: nothing may be spent
	is.Equal(show()["monthly_cap"], "0.000000")

	for _, args := range [][]string{
		{"--daily", "-1"}, {"--daily", "abc"}, {"--monthly", "0.0000001"}, {},
	} {
		code, _, stderr := run(t, db, append([]string{"credits", "cap", "--account", "acme"}, args...)...)
		is.True(code != 0)    // rejected
		is.True(stderr != "") // with a message
	}
	code, _, _ = run(t, db, "credits", "cap", "--account", "nobody", "--daily", "1")
	is.True(code != 0) // unknown account

	// The account's requests and tokens per minute, across its keys.
	code, _, stderr = run(t, db, "credits", "cap", "--account", "acme", "--rpm", "120", "--tpm", "50000")
	is.Equal(code, 0)                                                             // credits cap --rpm --tpm
	is.True(strings.Contains(stderr, "monthly cap 0.000000, rpm 120, tpm 50000")) // the caps kept
	v = show()
	is.Equal(v["rpm"], 120.0)
	is.Equal(v["tpm"], 50000.0)
	code, _, _ = run(t, db, "credits", "cap", "--account", "acme", "--rpm", "none")
	is.Equal(code, 0) // removed
	v = show()
	is.Equal(v["rpm"], nil)
	is.Equal(v["tpm"], 50000.0) // kept
	for _, args := range [][]string{{"--rpm=-1"}, {"--tpm=-5"}, {"--rpm", "many"}} {
		code, _, stderr := run(t, db, append([]string{"credits", "cap", "--account", "acme"}, args...)...)
		is.True(code != 0)    // rejected (a negative one by the store, as the API's)
		is.True(stderr != "") // with a message
	}
	is.Equal(show()["tpm"], 50000.0) // unchanged by the refusals
}

func TestCLI_KeysLimits(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	code, key, _ := run(t, db, "keys", "create", "--account", "acme", "--daily-limit", "1", "--monthly-limit", "10", "--rpm", "60", "--tpm", "0")
	is.Equal(code, 0) // keys create with limits
	key = strings.TrimSpace(key)
	is.True(strings.HasPrefix(key, "llm_live_")) // stdout is still only the key

	type keyJSON struct {
		ID         string  `json:"id"`
		DailyCap   *string `json:"daily_cap"`
		MonthlyCap *string `json:"monthly_cap"`
		RPM        *int64  `json:"rpm"`
		TPM        *int64  `json:"tpm"`
	}
	list := func() keyJSON {
		t.Helper()
		_, out, _ := run(t, db, "keys", "list", "--json")
		var keys []keyJSON
		if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 1 {
			t.Fatalf("keys list --json: %v: %s", err, out)
		}
		return keys[0]
	}
	k := list()
	is.Equal(*k.DailyCap, "1.000000")
	is.Equal(*k.MonthlyCap, "10.000000")
	is.Equal(*k.RPM, int64(60))
	is.Equal(*k.TPM, int64(0)) // unlimited, not the default
	_, table, _ := run(t, db, "keys", "list")
	is.True(strings.Contains(table, "unlimited")) // the table says so

	code, _, stderr := run(t, db, "keys", "limit", k.ID, "--daily", "none", "--rpm", "default", "--tpm", "1000")
	is.Equal(code, 0) // keys limit
	is.True(strings.Contains(stderr, "daily cap none, monthly cap 10.000000, rpm default, tpm 1000"))
	k = list()
	is.True(k.DailyCap == nil)           // cleared
	is.Equal(*k.MonthlyCap, "10.000000") // untouched
	is.True(k.RPM == nil)                // back to the server default
	is.Equal(*k.TPM, int64(1000))

	for _, args := range [][]string{
		{k.ID}, {k.ID, "--rpm", "-1"}, {k.ID, "--tpm", "lots"}, {"key_nope", "--rpm", "1"},
	} {
		code, _, stderr := run(t, db, append([]string{"keys", "limit"}, args...)...)
		is.True(code != 0)    // rejected
		is.True(stderr != "") // with a message
	}

	// A running server applies a key's new limits once its authentication
	// cache (store.DefaultAuthCacheTTL) lets go of the key.
	addr, _ := serve(t, db)
	call := func() int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
			strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	run(t, db, "credits", "add", "--account", "acme", "5")
	is.Equal(call(), http.StatusOK) // allowed
	code, _, _ = run(t, db, "keys", "limit", k.ID, "--rpm", "1")
	is.Equal(code, 0)
	time.Sleep(store.DefaultAuthCacheTTL)        // the documented propagation delay
	is.Equal(call(), http.StatusOK)              // the first of the minute
	is.Equal(call(), http.StatusTooManyRequests) // the second is over 1 per minute
}

func TestCLI_ServeRejectsNegativeRates(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	code, _, stderr := run(t, db, "serve", "--addr", "127.0.0.1:0", "--rpm", "-1")
	is.True(code != 0) // refused
	is.True(strings.Contains(stderr, "--rpm"))
}
