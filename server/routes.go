package server

import (
	"net/http"

	"github.com/svcgw/svcgw/surfaces/chat"
	"github.com/svcgw/svcgw/surfaces/dashboard"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/surfaces/messages"
)

// The inference surfaces, one per endpoint. The Responses surface seals
// with the server's key, so each Server builds its own (routes).
var (
	chatSurface       = adapt(chat.Codec{})
	messagesSurface   = adapt(messages.Codec{})
	genContentSurface = adapt(gencontent.Codec{})
)

// routes lists every route. Each answers under /svc and, for older clients,
// at the same path without it. The middleware around the mux is, in order:
// recover → request id → access log → body guard (the body's read deadline
// and size limit, see bodyGuard; nothing is read yet) (see New); inside
// each route: authentication (401) → handler, which reads the body only
// after the checks that need none (the request rate). Authentication failures use the
// envelope of the surface the path belongs to.
func (s *Server) routes() {
	responsesCodec := chat.ResponsesCodec{Sealer: s.sealer}
	responsesSurface := adapt(responsesCodec)
	for _, p := range []string{"/svc", ""} {
		s.handle("POST "+p+"/v1/chat/completions", chatSurface, s.handleInference(chatSurface))
		s.handle("POST "+p+"/v1/responses", responsesSurface, s.handleInference(responsesSurface))
		s.handle("POST "+p+"/v1/responses/input_tokens", responsesSurface, s.handleCount(responsesSurface, responsesCodec.CountTokens))
		s.handle("GET "+p+"/v1/responses/{id}", responsesSurface, s.handleStateless())
		s.handle("POST "+p+"/v1/messages", messagesSurface, s.handleInference(messagesSurface))
		s.handle("POST "+p+"/v1/messages/count_tokens", messagesSurface, s.handleCount(messagesSurface, messages.CountTokens))
		s.handle("POST "+p+"/v1beta/models/{rest...}", genContentSurface, s.handleGenContent())
		// The genai SDKs configured with APIVersion "v1" call the same
		// methods under /v1/models/.
		s.handle("POST "+p+"/v1/models/{rest...}", genContentSurface, s.handleGenContent())
		s.handle("GET "+p+"/v1beta/models", genContentSurface, s.handleGenContentModels())
		s.handle("GET "+p+"/v1beta/models/{rest...}", genContentSurface, s.handleGenContentModels())

		// /v1/models is shared by all three SDKs; the caller's headers pick
		// the shape (see headerSurface), and so the error envelope.
		s.mux.Handle("GET "+p+"/v1/models", s.withModelsAuth(s.handleModels()))
		s.mux.Handle("GET "+p+"/v1/models/{model...}", s.withModelsAuth(s.handleModels()))

		s.handle("GET "+p+"/v1/credits", chatSurface, s.account.Credits)
		s.handle("GET "+p+"/v1/usage", chatSurface, s.account.Usage)
		s.handle("GET "+p+"/v1/generation", chatSurface, s.account.Generation)
		s.handle("GET "+p+"/v1/generations", chatSurface, s.account.Generations)
		// Feedback writes rows: it counts against the key's requests per
		// minute like the count endpoints.
		s.handle("POST "+p+"/v1/feedback", chatSurface, s.withRPM(chatSurface, s.account.Feedback))
	}
	// Liveness: the process answers. Readiness: it can take billable
	// calls (the database answers, the ledger keeps up).
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	s.mux.Handle("GET /readyz", s.handleReady(false))
	// Anything else (a client configured with a wrong base URL, most
	// often): 404 in the envelope of the SDK the request's headers point
	// to, so that the SDK can read it, rather than net/http's plain text;
	// chat-completions when nothing points elsewhere.
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headerSurface(r).writeError(w, notFoundRoute(r))
	})
	s.mux.Handle("/", notFound)

	// The dashboard page, for a key holder's browser: at the root and at
	// /svc/dashboard. "GET /{$}" matches "/" alone, so every other unknown
	// path is still the 404 above. The page signs in with a key itself and
	// calls the account routes; the page and its files need none.
	if s.dashboard != nil {
		page := s.dashboard.Page()
		s.mux.Handle("GET /{$}", page)
		s.mux.Handle("GET /svc/dashboard", page)
		s.mux.Handle("GET /svc/dashboard/{$}", page)
		s.mux.Handle("GET "+dashboard.AssetPrefix+"{name...}", s.dashboard.Assets(notFound))
	}
}

// handle registers an authenticated route whose errors use sf's envelope.
func (s *Server) handle(pattern string, sf surface, h authedHandler) {
	s.mux.Handle(pattern, s.withAuth(sf, h))
}
