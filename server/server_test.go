package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/matryer/is"
)

// envelopeKind says which native error envelope a body is in, and its
// error type/status string.
func envelopeKind(t *testing.T, body []byte) (surface, typ string) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error *struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
			Param   *string `json:"param"`
			Code    any     `json:"code"`
			Status  *string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Error == nil || v.Error.Message == nil {
		t.Fatalf("not an error envelope: %s", body)
	}
	var raw map[string]map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw)
	switch {
	case v.Type == "error" && v.Error.Type != nil:
		return "messages", *v.Error.Type
	case v.Error.Status != nil:
		return "gencontent", *v.Error.Status
	default:
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, ok := raw["error"][k]; !ok {
				t.Fatalf("chat envelope lacks %q: %s", k, body)
			}
		}
		return "chat", *v.Error.Type
	}
}

const (
	chatBody     = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	messagesBody = `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	genBody      = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
)

// surfaceRoutes is one inference route per surface, with a valid body.
var surfaceRoutes = []struct {
	surface, path, body string
}{
	{"chat", "/svc/v1/chat/completions", chatBody},
	{"chat", "/svc/v1/responses", `{"model":"m","input":"hi"}`},
	{"messages", "/svc/v1/messages", messagesBody},
	{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", genBody},
}

func TestAuth_EachHeaderStyle(t *testing.T) {
	gw := newTestGateway(t)
	for _, tc := range []struct {
		name   string
		header []string
		query  string
	}{
		{"bearer", []string{"Authorization", "Bearer " + gw.Key}, ""},
		{"x-api-key", []string{"Authorization", "", "X-Api-Key", gw.Key}, ""},
		{"x-goog-api-key", []string{"Authorization", "", "X-Goog-Api-Key", gw.Key}, ""},
		{"x-gen-api-key (spec spelling)", []string{"Authorization", "", "X-Gen-Api-Key", gw.Key}, ""},
		{"key query parameter", []string{"Authorization", ""}, "?key=" + gw.Key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, http.MethodGet, "/svc/v1/credits"+tc.query, "", tc.header...)
			is.Equal(resp.StatusCode, http.StatusOK) // authenticated
			is.True(strings.Contains(string(body), `"balance":"10.000000"`))
		})
	}
}

func TestAuth_401InTheSurfaceEnvelope(t *testing.T) {
	gw := newTestGateway(t)
	revoked, revokedID := gw.newKey(t, "other", "1")
	if _, err := gw.Store.RevokeKey(t.Context(), revokedID); err != nil {
		t.Fatal(err)
	}
	for _, r := range surfaceRoutes {
		for _, key := range []struct{ name, header string }{
			{"missing", ""},
			{"unknown", "Bearer llm_live_nope"},
			{"revoked", "Bearer " + revoked},
		} {
			t.Run(r.path+" "+key.name, func(t *testing.T) {
				is := is.New(t)
				resp, body := gw.do(t, http.MethodPost, r.path, r.body, "Authorization", key.header)
				is.Equal(resp.StatusCode, http.StatusUnauthorized) // 401
				surface, _ := envelopeKind(t, body)
				is.Equal(surface, r.surface) // the path's own envelope
			})
		}
	}
	t.Run("account endpoints", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodGet, "/svc/v1/usage", "", "Authorization", "")
		is.Equal(resp.StatusCode, http.StatusUnauthorized)
		surface, _ := envelopeKind(t, body)
		is.Equal(surface, "chat")
	})
}

func TestBodyLimit_413InTheSurfaceEnvelope(t *testing.T) {
	gw := newTestGateway(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	big := strings.Repeat("x", 4096)
	for _, r := range surfaceRoutes {
		t.Run(r.path, func(t *testing.T) {
			is := is.New(t)
			body := strings.Replace(r.body, `"hi"`, `"`+big+`"`, 1)
			resp, out := gw.do(t, http.MethodPost, r.path, body)
			is.Equal(resp.StatusCode, http.StatusRequestEntityTooLarge) // 413
			surface, _ := envelopeKind(t, out)
			is.Equal(surface, r.surface) // native envelope
		})
	}
}

func TestRoutes_WithoutSvcPrefix(t *testing.T) {
	gw := newTestGateway(t)
	for _, r := range surfaceRoutes {
		t.Run(r.path, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, http.MethodPost, strings.TrimPrefix(r.path, "/svc"), r.body)
			is.Equal(resp.StatusCode, http.StatusOK) // served without /svc
			is.True(resp.Header.Get("X-SVC-Request-Type") != "")
			is.True(len(body) > 0)
		})
	}
	is := is.New(t)
	resp, _ := gw.do(t, http.MethodGet, "/v1/credits", "")
	is.Equal(resp.StatusCode, http.StatusOK) // account endpoints too
}

func TestRoutes_UnknownPathIs404(t *testing.T) {
	gw := newTestGateway(t)
	// A client with a wrong base URL gets the 404 in its own SDK's
	// envelope, picked from the headers that SDK always sends.
	for _, tt := range []struct {
		name, method, path string
		header             []string
		surface, typ       string
	}{
		{"no hint", http.MethodGet, "/svc/v1/nothing-here", nil, "chat", "invalid_request_error"},
		{"anthropic-version (base URL ending /v1)", http.MethodPost, "/svc/v1/v1/messages", []string{"anthropic-version", "2023-06-01", "x-api-key", gw.Key}, "messages", "not_found_error"},
		{"x-goog-api-key", http.MethodPost, "/svc/v1/v1beta/models/gemini-2.5-flash:generateContent", []string{"x-goog-api-key", gw.Key}, "gencontent", "NOT_FOUND"},
		{"key= query", http.MethodPost, "/svc/nope/models/m:generateContent?key=" + gw.Key, nil, "gencontent", "NOT_FOUND"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, tt.method, tt.path, messagesBody, tt.header...)
			is.Equal(resp.StatusCode, http.StatusNotFound)
			surface, typ := envelopeKind(t, body)
			is.Equal(surface, tt.surface) // the envelope the headers point to
			is.Equal(typ, tt.typ)
		})
	}
}

// A path that is served, with another method than the request's, is 405
// with Allow, in the envelope the headers point to; a path served with no
// method at all is still the 404.
func TestRoutes_WrongMethodIs405WithAllow(t *testing.T) {
	gw := newTestGateway(t)
	for _, tt := range []struct {
		name, method, path string
		header             []string
		allow              string
		surface, typ       string
	}{
		{"GET on chat completions", http.MethodGet, "/svc/v1/chat/completions", nil, "POST", "chat", "invalid_request_error"},
		{"GET on messages, bare path", http.MethodGet, "/v1/messages", []string{"anthropic-version", "2023-06-01"}, "POST", "messages", "invalid_request_error"},
		// GET on a model path is the model's lookup.
		{"DELETE on generateContent", http.MethodDelete, "/svc/v1beta/models/gemini-2.5-flash:generateContent", []string{"x-goog-api-key", gw.Key}, "GET, HEAD, POST", "gencontent", "INVALID_ARGUMENT"},
		{"POST on credits", http.MethodPost, "/svc/v1/credits", nil, "GET, HEAD", "chat", "invalid_request_error"},
		{"PUT on feedback", http.MethodPut, "/svc/v1/feedback", nil, "POST", "chat", "invalid_request_error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, tt.method, tt.path, "", tt.header...)
			is.Equal(resp.StatusCode, http.StatusMethodNotAllowed)
			is.Equal(resp.Header.Get("Allow"), tt.allow) // the methods the path takes
			surface, typ := envelopeKind(t, body)
			is.Equal(surface, tt.surface) // the envelope the headers point to
			is.Equal(typ, tt.typ)
		})
	}
	resp, _ := gw.do(t, http.MethodGet, "/svc/v1/nothing-here", "")
	is.New(t).Equal(resp.StatusCode, http.StatusNotFound) // no method serves it
}

// Claude Code (2.1.197) sends HEAD to its base URL before the first call;
// it was a 404, the one 4xx of scripts/clients/verify.sh's run.
func TestRoutes_BaseURLAnswersHead(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	for _, path := range []string{"/svc", "/svc/"} {
		resp, body := gw.do(t, http.MethodHead, path, "", "Authorization", "")
		is.Equal(resp.StatusCode, http.StatusOK)
		is.Equal(len(body), 0)
	}
	resp, _ := gw.do(t, http.MethodGet, "/svc/v1/nothing-here", "")
	is.Equal(resp.StatusCode, http.StatusNotFound) // nothing else changes
}

// The Anthropic SDK with a base URL that already ends in /v1 (a common
// mistake: it appends /v1/messages itself) reads the 404 as its own typed
// not_found_error.
func TestRoutes_UnknownPathIs404InTheSDKsEnvelope(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := anthropic.NewClient(option.WithBaseURL(gw.URL+"/svc/v1"), option.WithAPIKey(gw.Key), option.WithMaxRetries(0))
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: msgsUser("hi")})
	var apiErr *anthropic.Error
	is.True(errors.As(err, &apiErr)) // a typed API error
	is.Equal(apiErr.StatusCode, http.StatusNotFound)
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	is.NoErr(json.Unmarshal([]byte(apiErr.RawJSON()), &env))
	is.Equal(env.Type, "error")
	is.Equal(env.Error.Type, "not_found_error")
}

func TestRequestID_OnEveryResponse(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	ok, _ := gw.do(t, http.MethodGet, "/svc/v1/credits", "")
	bad, _ := gw.do(t, http.MethodGet, "/svc/v1/credits", "", "Authorization", "")
	is.True(strings.HasPrefix(ok.Header.Get("X-Request-Id"), "req_"))
	is.True(strings.HasPrefix(bad.Header.Get("X-Request-Id"), "req_"))
	is.True(ok.Header.Get("X-Request-Id") != bad.Header.Get("X-Request-Id"))
}

// Every answer, JSON or error, a stream or the page, forbids content-type
// sniffing.
func TestNosniff_OnEveryResponse(t *testing.T) {
	gw := newTestGateway(t)
	for _, c := range []struct{ name, method, path, body string }{
		{"account JSON", http.MethodGet, "/svc/v1/credits", ""},
		{"a call", http.MethodPost, "/svc/v1/chat/completions", chatBody},
		{"a stream", http.MethodPost, "/svc/v1/chat/completions", strings.Replace(chatBody, `{`, `{"stream":true,`, 1)},
		{"an error", http.MethodPost, "/svc/v1/chat/completions", `{`},
		{"an unknown path", http.MethodGet, "/svc/v1/nope", ""},
		{"readiness", http.MethodGet, "/readyz", ""},
		{"the page", http.MethodGet, "/", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			resp, _ := gw.do(t, c.method, c.path, c.body)
			is.Equal(resp.Header.Get("X-Content-Type-Options"), "nosniff")
		})
	}
}

func TestPaymentRequired_WhenBalanceIsSpent(t *testing.T) {
	gw := newTestGateway(t)
	broke, _ := gw.newKey(t, "broke", "")
	for _, r := range surfaceRoutes {
		t.Run(r.path, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, http.MethodPost, r.path, r.body, "Authorization", "Bearer "+broke)
			is.Equal(resp.StatusCode, http.StatusPaymentRequired) // 402
			surface, _ := envelopeKind(t, body)
			is.Equal(surface, r.surface)
		})
	}
}

func TestAccessLog_NamesRouteAndBackendForTheOperatorOnly(t *testing.T) {
	is := is.New(t)
	var logs syncBuffer
	gw := newTestGateway(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody)
	is.Equal(resp.StatusCode, http.StatusOK)
	is.True(!strings.Contains(string(body), "fixture")) // the caller never sees the backend
	line := logs.String()
	is.True(strings.Contains(line, `route="POST /svc/v1/chat/completions"`)) // the route pattern
	is.True(strings.Contains(line, "backend=fixture"))                       // the operator does
	is.True(strings.Contains(line, "attempts=1"))
	is.True(strings.Contains(line, "request_type=pro"))
	is.True(!strings.Contains(line, "hi\"")) // never the prompt
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
