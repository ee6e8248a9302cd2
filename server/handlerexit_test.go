package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/messages"
)

// TestWithAuth_OneExit holds withAuth to being the one exit of an
// authenticated route: a failure the handler returns before its reply is
// written in the route's envelope, with its kind's status; one returned
// after the reply began is logged, and the reply is left as it was.
func TestWithAuth_OneExit(t *testing.T) {
	var logs bytes.Buffer
	gw := newTestGateway(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	serve := func(h authedHandler) *httptest.ResponseRecorder {
		t.Helper()
		rr := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(`{}`))
		r.Header.Set("X-Api-Key", gw.Key)
		gw.Server.withAccessLog(gw.Server.withAuth(messages.Codec{}, h)).ServeHTTP(rr, r)
		return rr
	}

	t.Run("a failure before the reply is written in the route's envelope", func(t *testing.T) {
		is := is.New(t)
		rr := serve(func(w http.ResponseWriter, r *http.Request, caller *store.Key) error {
			is.True(caller.ID != "") // authenticated
			return &llm.Error{Kind: llm.KindPaymentRequired, Message: "insufficient credits"}
		})
		is.Equal(rr.Code, http.StatusPaymentRequired)
		var env struct {
			Type  string
			Error struct{ Type, Message string }
		}
		is.NoErr(json.Unmarshal(rr.Body.Bytes(), &env))
		is.Equal(env.Type, "error")               // messages' envelope
		is.Equal(env.Error.Type, "billing_error") // of the kind
		is.Equal(env.Error.Message, "insufficient credits")
	})
	t.Run("a failure after the reply began is logged, not written", func(t *testing.T) {
		is := is.New(t)
		logs.Reset()
		rr := serve(func(w http.ResponseWriter, r *http.Request, _ *store.Key) error {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("event: ping\n\n"))
			return errors.New("encoder broke")
		})
		is.Equal(rr.Code, http.StatusOK)
		is.Equal(rr.Body.String(), "event: ping\n\n")                                    // nothing appended
		is.True(strings.Contains(logs.String(), "handler failed after its reply began")) // logged
		is.True(strings.Contains(logs.String(), "encoder broke"))
	})
}
