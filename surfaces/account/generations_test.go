package account_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// listOf decodes a listing body.
func listOf(t *testing.T, body map[string]any) (ids []string, lastID string, more bool) {
	t.Helper()
	data, ok := body["data"].([]any)
	if !ok {
		t.Fatalf("no data in %v", body)
	}
	for _, d := range data {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	lastID, _ = body["last_id"].(string)
	return ids, lastID, body["has_more"].(bool)
}

func TestGenerations_PagesNewestFirst(t *testing.T) {
	e := newEnv(t)
	at := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("chatcmpl-%d", i)
		typ := "code"
		if i%3 == 0 {
			typ = "flash"
		}
		e.record(t, at.Add(time.Duration(i)*time.Second), store.Generation{
			ID: id, AccountID: e.acme.AccountID, KeyID: e.acme2.ID, Application: fmt.Sprint("app", i%2),
			Surface: "messages", Model: "claude-sonnet", RequestType: typ, FinishReason: "stop",
			PromptTokens: 10, CompletionTokens: 5, Cost: money.Micros(i + 1),
		})
		want = append([]string{id}, want...)
	}
	e.record(t, at, store.Generation{ID: "msg_beta", AccountID: e.beta.AccountID, KeyID: e.beta.ID, Cost: money.Micros(1_000_000)})

	t.Run("every page in order", func(t *testing.T) {
		is := is.New(t)
		var got []string
		target := "/svc/v1/generations?limit=3"
		for range 5 {
			status, body := call(t, e.h.Generations, "GET", target, "", e.acme)
			is.Equal(status, 200)
			ids, last, more := listOf(t, body)
			got = append(got, ids...)
			if !more {
				break
			}
			target = "/svc/v1/generations?limit=3&before=" + url.QueryEscape(last)
		}
		is.Equal(got, want) // newest first, each once, without beta's
	})
	t.Run("an item is the generation record and more", func(t *testing.T) {
		is := is.New(t)
		status, body := call(t, e.h.Generations, "GET", "/svc/v1/generations?limit=1", "", e.acme)
		is.Equal(status, 200)
		is.Equal(body, jsonOf(t, `{"object":"list","first_id":"chatcmpl-6","last_id":"chatcmpl-6","has_more":true,
			"data":[{"id":"chatcmpl-6","request_type":"flash","created_at":"2025-03-10T12:00:06Z","streamed":false,
			  "finish_reason":"stop","total_cost":"0.000007",
			  "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"cached_prompt_tokens":0,"reasoning_tokens":0},
			  "latency_ms":0,"generation_time_ms":0,"application":"app0","model":"claude-sonnet",
			  "surface":"messages","api_key":"`+e.acme2.ID+`","feedback":{"up":0,"down":0,"review":null}}]}`))
	})
	t.Run("filters", func(t *testing.T) {
		is := is.New(t)
		status, body := call(t, e.h.Generations, "GET", "/svc/v1/generations?request_type=flash&application=app0", "", e.acme)
		is.Equal(status, 200)
		ids, _, more := listOf(t, body)
		is.Equal(ids, []string{"chatcmpl-6", "chatcmpl-0"})
		is.True(!more)
	})
	t.Run("empty", func(t *testing.T) {
		is := is.New(t)
		status, body := call(t, e.h.Generations, "GET", "/svc/v1/generations?application=nobody", "", e.acme)
		is.Equal(status, 200)
		is.Equal(body, jsonOf(t, `{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}`))
	})
	t.Run("a review shows in the list", func(t *testing.T) {
		is := is.New(t)
		status, _ := call(t, e.h.Feedback, "POST", "/svc/v1/feedback",
			`{"id":"chatcmpl-6","rating":"down","comment":"too short","end_user":"`+store.ReviewEndUser+`"}`, e.acme)
		is.Equal(status, 200)
		status, _ = call(t, e.h.Feedback, "POST", "/svc/v1/feedback", `{"id":"chatcmpl-6","rating":"up"}`, e.acme)
		is.Equal(status, 200)
		_, body := call(t, e.h.Generations, "GET", "/svc/v1/generations?limit=1", "", e.acme)
		fb, _ := json.Marshal(body["data"].([]any)[0].(map[string]any)["feedback"])
		is.Equal(string(fb), `{"down":1,"review":{"comment":"too short","rating":"down"},"up":1}`)
	})
}

func TestGenerations_BadQueries(t *testing.T) {
	e := newEnv(t)
	e.record(t, e.clock.Now(), store.Generation{ID: "msg_beta", AccountID: e.beta.AccountID, KeyID: e.beta.ID, Cost: money.Micros(1_000_000)})
	for _, tt := range []struct{ name, query, param, says string }{
		{"limit zero", "limit=0", "limit", "from 1 to 200"},
		{"limit too large", "limit=201", "limit", "from 1 to 200"},
		{"limit not a number", "limit=ten", "limit", "integer"},
		{"unknown request type", "request_type=chat", "request_type", "flash"},
		{"unknown cursor", "before=chatcmpl-nope", "before", "last_id"},
		{"another account's id as cursor", "before=msg_beta", "before", "last_id"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			status, body := call(t, e.h.Generations, "GET", "/svc/v1/generations?"+tt.query, "", e.acme)
			is.Equal(status, 400) // rejected
			kind, param := errorOf(t, body)
			is.Equal(kind, "invalid_request")
			is.Equal(param, tt.param)
			msg := body["error"].(map[string]any)["message"].(string)
			is.True(strings.Contains(msg, tt.says)) // says what is wanted
		})
	}
}

func TestUsage_ByDayAndAxis(t *testing.T) {
	is := is.New(t)
	e := usageEnv(t)
	status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?group_by=day,request_type&start_date=2025-03-10&end_date=2025-03-11", "", e.acme)
	is.Equal(status, 200)
	cell := func(day, bucket string, cost string) string {
		return fmt.Sprintf(`{"day":%q,"bucket":%q,"requests":1,"input_tokens":100,"output_tokens":20,"total_tokens":120,"cached_input_tokens":40,"cache_write_tokens":0,"reasoning_tokens":0,"cost":%q}`, day, bucket, cost)
	}
	is.Equal(body, jsonOf(t, `{"object":"usage","group_by":"day,request_type",
		"start_date":"2025-03-10T00:00:00Z","end_date":"2025-03-12T00:00:00Z",
		"data":[`+cell("2025-03-10", "code", "0.100000")+`,`+cell("2025-03-10", "pro", "0.200000")+`,`+cell("2025-03-11", "vision", "0.300000")+`],
		"total":{"requests":3,"input_tokens":300,"output_tokens":60,"total_tokens":360,"cached_input_tokens":120,"cache_write_tokens":0,"reasoning_tokens":0,"cost":"0.600000"}}`))

	for _, axis := range []string{"application", "api_key"} {
		status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?group_by=day,"+axis, "", e.acme)
		is.Equal(status, 200)
		is.Equal(len(body["data"].([]any)), 4) // one cell per call here: each is a day × bucket of its own
		is.Equal(body["total"].(map[string]any)["cost"], "1.000001")
	}
	for _, bad := range []string{"day,day", "day,model", "day,", "request_type,day", "day,request_type,application"} {
		status, body := call(t, e.h.Usage, "GET", "/svc/v1/usage?group_by="+url.QueryEscape(bad), "", e.acme)
		is.Equal(status, 400) // refused
		_, param := errorOf(t, body)
		is.Equal(param, "group_by")
	}
}
