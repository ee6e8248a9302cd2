package account_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// feedbackEnv records chatcmpl-a (acme) and msg_b (beta) and returns the env.
func feedbackEnv(t *testing.T) *env {
	e := newEnv(t)
	now := e.clock.Now()
	e.record(t, now, store.Generation{ID: "chatcmpl-a", AccountID: e.acme.AccountID, KeyID: e.acme.ID,
		PromptTokens: 10, CompletionTokens: 5, Cost: money.Micros(250_000)})
	e.record(t, now, store.Generation{ID: "msg_b", AccountID: e.beta.AccountID, KeyID: e.beta.ID, Cost: money.Micros(1_000_000)})
	return e
}

// feedbackRows returns the stored (end_user, rating, comment, labels) rows
// of a generation, read straight from the database file.
func feedbackRows(t *testing.T, e *env, id string) [][4]string {
	t.Helper()
	db, err := sql.Open("sqlite", e.path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT end_user, rating, comment, COALESCE(labels, 'NULL') FROM feedback WHERE generation_id = ? ORDER BY end_user`, id)
	if err != nil {
		t.Fatalf("query feedback: %v", err)
	}
	defer rows.Close()
	var out [][4]string
	for rows.Next() {
		var r [4]string
		if err := rows.Scan(&r[0], &r[1], &r[2], &r[3]); err != nil {
			t.Fatalf("scan feedback: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func TestFeedback(t *testing.T) {
	is := is.New(t)
	e := feedbackEnv(t)
	post := func(body string) (int, map[string]any) {
		return call(t, e.h.Feedback, "POST", "/svc/v1/feedback", body, e.acme)
	}
	_, creditsBefore := call(t, e.h.Credits, "GET", "/svc/v1/credits", "", e.acme)
	_, usageBefore := call(t, e.h.Usage, "GET", "/svc/v1/usage?group_by=api_key", "", e.acme)

	status, body := post(`{"id":"chatcmpl-a","rating":"up","comment":"great","labels":{"topic":"billing","score":3,"ok":true}}`)
	is.Equal(status, 200) // first rating
	is.Equal(body, jsonOf(t, `{"object":"feedback","id":"chatcmpl-a","rating":"up","recorded":true,"end_user":null}`))
	is.Equal(feedbackRows(t, e, "chatcmpl-a"), [][4]string{
		{"", "up", "great", `{"ok":true,"score":3,"topic":"billing"}`},
	}) // stored with normalised labels

	status, body = post(`{"id":"chatcmpl-a","rating":"down"}`)
	is.Equal(status, 200) // same (id, end_user) again
	is.Equal(body, jsonOf(t, `{"object":"feedback","id":"chatcmpl-a","rating":"down","recorded":true,"end_user":null}`))
	is.Equal(feedbackRows(t, e, "chatcmpl-a"), [][4]string{{"", "down", "", "NULL"}}) // updated, no duplicate

	status, body = post(`{"id":"chatcmpl-a","rating":"up","end_user":"user-7","comment":null,"labels":null,"extra":1}`)
	is.Equal(status, 200) // another end user; nulls and unknown fields ignored
	is.Equal(body, jsonOf(t, `{"object":"feedback","id":"chatcmpl-a","rating":"up","recorded":true,"end_user":"user-7"}`))
	status, _ = post(`{"id":"chatcmpl-a","rating":"down","end_user":"user-7"}`)
	is.Equal(status, 200) // that end user changes their mind
	is.Equal(feedbackRows(t, e, "chatcmpl-a"), [][4]string{
		{"", "down", "", "NULL"},
		{"user-7", "down", "", "NULL"},
	}) // one rating per end user

	_, creditsAfter := call(t, e.h.Credits, "GET", "/svc/v1/credits", "", e.acme)
	_, usageAfter := call(t, e.h.Usage, "GET", "/svc/v1/usage?group_by=api_key", "", e.acme)
	is.Equal(creditsAfter, creditsBefore) // feedback is free
	is.Equal(usageAfter, usageBefore)     // and is not usage
}

func TestFeedback_Errors(t *testing.T) {
	e := feedbackEnv(t)
	tests := []struct {
		name   string
		body   string
		status int
		param  string
	}{
		{"malformed JSON", `{"id":`, 400, ""},
		{"not an object", `["chatcmpl-a","up"]`, 400, ""},
		{"empty body", ``, 400, ""},
		{"trailing data", `{"id":"chatcmpl-a","rating":"up"} {"id":"x"}`, 400, ""},
		{"id missing", `{"rating":"up"}`, 400, "id"},
		{"id empty", `{"id":"","rating":"up"}`, 400, "id"},
		{"id null", `{"id":null,"rating":"up"}`, 400, "id"},
		{"id a number", `{"id":5,"rating":"up"}`, 400, "id"},
		{"rating missing", `{"id":"chatcmpl-a"}`, 400, "rating"},
		{"rating a boolean", `{"id":"chatcmpl-a","rating":true}`, 400, "rating"},
		{"rating not up or down", `{"id":"chatcmpl-a","rating":"meh"}`, 400, "rating"},
		{"rating in capitals", `{"id":"chatcmpl-a","rating":"UP"}`, 400, "rating"},
		{"comment a number", `{"id":"chatcmpl-a","rating":"up","comment":1}`, 400, "comment"},
		{"end_user an object", `{"id":"chatcmpl-a","rating":"up","end_user":{}}`, 400, "end_user"},
		{"labels an array", `{"id":"chatcmpl-a","rating":"up","labels":["a"]}`, 400, "labels"},
		{"labels a string", `{"id":"chatcmpl-a","rating":"up","labels":"a"}`, 400, "labels"},
		{"labels nested object", `{"id":"chatcmpl-a","rating":"up","labels":{"a":{"b":1}}}`, 400, "labels"},
		{"labels nested array", `{"id":"chatcmpl-a","rating":"up","labels":{"a":[1]}}`, 400, "labels"},
		{"labels null value", `{"id":"chatcmpl-a","rating":"up","labels":{"a":null}}`, 400, "labels"},
		{"unknown id", `{"id":"chatcmpl-zzz","rating":"up"}`, 404, "id"},
		{"another account's id", `{"id":"msg_b","rating":"up"}`, 404, "id"},
		{"too large", `{"id":"chatcmpl-a","rating":"up","comment":"` + strings.Repeat("x", 70<<10) + `"}`, 413, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			status, body := call(t, e.h.Feedback, "POST", "/svc/v1/feedback", tt.body, e.acme)
			is.Equal(status, tt.status) // status
			_, param := errorOf(t, body)
			is.Equal(param, tt.param) // offending field
		})
	}
	is.New(t).Equal(len(feedbackRows(t, e, "chatcmpl-a")), 0) // nothing stored
}

func TestFeedback_MaxAge(t *testing.T) {
	e := feedbackEnv(t)
	recorded := e.clock.Now()
	if err := e.st.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		age    time.Duration
		status int
	}{
		{"a day old", 24 * time.Hour, 200},
		{"exactly 30 days old", 30 * 24 * time.Hour, 200},
		{"30 days and a second", 30*24*time.Hour + time.Second, 409},
		{"a year old", 365 * 24 * time.Hour, 409},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			e.clock.Set(recorded.Add(tt.age))
			status, body := call(t, e.h.Feedback, "POST", "/svc/v1/feedback", `{"id":"chatcmpl-a","rating":"up"}`, e.acme)
			is.Equal(status, tt.status) // status
			if tt.status != 200 {
				kind, param := errorOf(t, body)
				is.Equal(kind, "conflict") // kind
				is.Equal(param, "id")      // offending field
			}
		})
	}
}

func TestFeedback_EndUsersPerResponseAreBounded(t *testing.T) {
	is := is.New(t)
	e := feedbackEnv(t)
	post := func(endUser, rating string) (int, map[string]any) {
		return call(t, e.h.Feedback, "POST", "/svc/v1/feedback",
			`{"id":"chatcmpl-a","rating":"`+rating+`","end_user":"`+endUser+`"}`, e.acme)
	}
	for i := range store.MaxFeedbackEndUsers {
		status, _ := post(fmt.Sprint("u", i), "up")
		is.Equal(status, 200)
	}
	status, body := post("one-more", "up")
	is.Equal(status, 409) // the rows one response takes are bounded
	msg := body["error"].(map[string]any)["message"].(string)
	is.True(strings.Contains(msg, fmt.Sprint(store.MaxFeedbackEndUsers, " end users")))
	status, _ = post("u3", "down")
	is.Equal(status, 200) // an end user who rated it may still change its mind
	is.Equal(len(feedbackRows(t, e, "chatcmpl-a")), store.MaxFeedbackEndUsers)
}
