package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
)

// TestBackup_WhileServing runs svcgw backup against a database that svcgw
// serve is writing, calls in flight, and checks the copy.
func TestBackup_WhileServing(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "svcgw.db")
	addr, stderr := serve(t, db, "--bootstrap-credits", "100")
	var key string
	for _, f := range strings.Fields(stderr.String()) {
		if strings.HasPrefix(f, "llm_live_") {
			key = f
			break
		}
	}
	is.True(key != "") // the bootstrap key
	call := func(text string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
			strings.NewReader(`{"model":"svc-fusion","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("call: %d", resp.StatusCode)
		}
	}
	for i := range 20 {
		call(fmt.Sprint("before ", i))
	}
	status, _ := getCredits(t, addr, key) // makes the calls so far committed
	is.Equal(status, 200)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				call(fmt.Sprintf("during %d-%d", w, i))
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // calls flowing
	copyPath := filepath.Join(dir, "backup.db")
	code, out, errOut := run(t, db, "backup", copyPath)
	close(stop)
	wg.Wait()
	is.Equal(code, 0) // backed up
	is.True(strings.HasPrefix(out, "backed up "+db+" to "+copyPath+": "))
	is.True(strings.HasSuffix(out, ", integrity_check ok\n"))
	is.Equal(errOut, "")

	// The copy opens, and its ledger reconciles.
	st, err := sqlite.Open(context.Background(), copyPath, store.Options{})
	is.NoErr(err)
	defer st.Close()
	acct, err := st.AccountByName(context.Background(), "default")
	is.NoErr(err)
	usage, err := st.Usage(context.Background(), acct.ID, store.UsageQuery{GroupBy: store.GroupByAPIKey})
	is.NoErr(err)
	is.Equal(len(usage), 1)
	is.True(usage[0].Requests >= 20) // calls made before the copy are in it
	is.Equal(usage[0].Cost.Cmp(&acct.TotalUsed), 0)

	// A second backup to the same file is refused, and leaves it alone.
	before, err := os.ReadFile(copyPath)
	is.NoErr(err)
	code, _, errOut = run(t, db, "backup", copyPath)
	is.Equal(code, 1) // refused
	is.True(strings.Contains(errOut, "already exists"))
	after, err := os.ReadFile(copyPath)
	is.NoErr(err)
	is.Equal(len(after), len(before))
}

func TestBackup_NeverCreatesADatabase(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "missing.db")
	code, _, errOut := run(t, db, "backup", filepath.Join(dir, "copy.db"))
	is.Equal(code, 1)
	is.True(strings.Contains(errOut, "no such file"))
	entries, err := os.ReadDir(dir)
	is.NoErr(err)
	is.Equal(len(entries), 0) // nothing created
}
