package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/svcgw/svcgw/store"
)

// TokenStore checks admin tokens.
type TokenStore interface {
	AuthenticateAdmin(ctx context.Context, secret string) (store.AdminToken, error)
}

type tokenKey struct{}

// TokenFrom returns the admin token Guard admitted the request with.
func TokenFrom(ctx context.Context) (store.AdminToken, bool) {
	t, ok := ctx.Value(tokenKey{}).(store.AdminToken)
	return t, ok
}

// Guard returns next behind admin tokens: a request for which open is
// false must carry an active admin token (Authorization: Bearer …) or is
// refused 401, and one that would change something (any method but GET,
// HEAD and OPTIONS) with a read-only token is refused 403. The server puts
// it in front of the whole admin listener, with open true for /healthz,
// /readyz and, when so configured, /metrics.
func Guard(st TokenStore, open func(*http.Request) bool, log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open != nil && open(r) {
			next.ServeHTTP(w, r)
			return
		}
		secret, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="svcgw admin"`)
			writeError(w, http.StatusUnauthorized, codeUnauthorized,
				"missing admin token: send it as Authorization: Bearer <token> (svcgw admin tokens create)")
			return
		}
		t, err := st.AuthenticateAdmin(r.Context(), secret)
		switch {
		case errors.Is(err, store.ErrNotFound):
			w.Header().Set("WWW-Authenticate", `Bearer realm="svcgw admin", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, codeUnauthorized, "invalid admin token")
			return
		case errors.Is(err, store.ErrUnavailable):
			log.Warn("admin token: database unavailable", "err", err)
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the database cannot answer now; retry later")
			return
		case err != nil:
			log.Error("admin token", "err", err)
			writeError(w, http.StatusInternalServerError, codeInternal, "internal error")
			return
		}
		if t.ReadOnly && !reads(r.Method) {
			writeError(w, http.StatusForbidden, codeForbidden, "admin token "+t.Name+" is read-only: it may read everything and change nothing")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	})
}

// reads reports whether a request of method changes nothing.
func reads(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
