package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestListGenerations_PlanReadsTheFilterIndex pins that a page is read
// from an index in its own order, no scan of the table and no sort,
// whatever the depth of the cursor: (account_id, created_at) unfiltered,
// and the index of the filter when filtered (with both, either, as
// rarerIndex picks), so that a rare or absent value costs what any page
// does.
func TestListGenerations_PlanReadsTheFilterIndex(t *testing.T) {
	s, _ := newTestStore(t)
	for _, c := range storetest.ListCases() {
		args := c.Args()
		if c.Cursor { // listSQL takes the cursor's created_at twice, then its rowid
			args = append(args[:2:2], append([]any{2, 2, 3}, args[4:]...)...)
		}
		indexes := []string{listIndexFor(store.ListQuery{})}
		switch {
		case c.Application && c.RequestType:
			indexes = []string{indexByApplication, indexByRequestType}
		case c.Application:
			indexes = []string{indexByApplication}
		case c.RequestType:
			indexes = []string{indexByRequestType}
		}
		for _, index := range indexes {
			plan := queryPlan(t, s, `EXPLAIN QUERY PLAN `+listSQL(c.Cursor, c.RequestType, c.Application, index), args...)
			want := map[string]string{
				indexByAccount:     "generations_account_created (account_id=?",
				indexByApplication: "generations_account_application (account_id=? AND application=?",
				indexByRequestType: "generations_account_request_type (account_id=? AND request_type=?",
			}[index]
			if c.Cursor {
				want += " AND created_at<?)"
			} else {
				want += ")"
			}
			if !strings.Contains(plan, "SEARCH g USING INDEX "+want) {
				t.Errorf("%v, %s: plan does not search %s:\n%s", c, index, want, plan)
			}
			if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN g") || strings.Contains(plan, "SCAN f") {
				t.Errorf("%v, %s: plan sorts or scans a table:\n%s", c, index, plan)
			}
		}
	}
}

// TestListGenerations_BothFiltersReadTheRarerIndex checks rarerIndex's
// pick: the index of whichever value has fewer generations, the
// application's on a tie or when both pass the probe's bound.
func TestListGenerations_BothFiltersReadTheRarerIndex(t *testing.T) {
	s, _ := newTestStore(t)
	_, k, _ := storetest.NewAccount(t, s, "acme", "10")
	for i := range 30 {
		g := storetest.Gen(t, fmt.Sprint("g", i), k, "0.01")
		g.Application = []string{"busy", "busy", "quiet"}[i%3] // 20, 10
		g.RequestType = "flash"                                // 30
		if i%10 == 0 {
			g.RequestType = "document" // 3
		}
		s.RecordGeneration(g)
	}
	ctx := context.Background()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ app, typ, want string }{
		{"busy", "document", indexByRequestType},
		{"quiet", "flash", indexByApplication},
		{"absent", "flash", indexByApplication},
		{"busy", "absent", indexByRequestType},
		{"absent", "absent", indexByApplication},
	} {
		tx, err := s.r.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rarerIndex(ctx, tx, k.AccountID, store.ListQuery{Application: tc.app, RequestType: tc.typ})
		tx.Rollback()
		if err != nil || got != tc.want {
			t.Errorf("application %q, request type %q: %s, %v; want %s", tc.app, tc.typ, got, err, tc.want)
		}
	}
}

func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	var plan []string
	storetest.Query(t, s, q, args, func(r store.Scanner) error {
		var id, parent, unused int
		var detail string
		if err := r.Scan(&id, &parent, &unused, &detail); err != nil {
			return err
		}
		plan = append(plan, detail)
		return nil
	})
	return strings.Join(plan, "\n")
}
