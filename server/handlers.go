package server

import (
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/chat"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/surfaces/messages"
)

// countFunc is a surface's advisory token counter: it decodes the body and
// writes the native count response or error. It never reaches a backend.
type countFunc func(w http.ResponseWriter, r *http.Request, body []byte)

// handleCount serves a count-tokens endpoint: authenticated and counted
// against the key's requests per minute (a count reads and decodes the
// whole body), never billed, never recorded.
func (s *Server) handleCount(sf surface, count countFunc) authedHandler {
	return s.withRPM(sf, func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		body, err := s.readBody(r)
		if err != nil {
			sf.writeError(w, err)
			return
		}
		count(w, r, body)
	})
}

// withRPM takes one request from the key's requests-per-minute bucket
// before next runs (and before the body is read), or answers 429 in sf's
// envelope.
func (s *Server) withRPM(sf surface, next authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller store.Key) {
		if err := s.limiter.request(caller.ID, limitOr(caller.Limits.RPM, s.rpm), s.now()); err != nil {
			sf.writeError(w, err)
			return
		}
		next(w, r, caller)
	}
}

// handleStateless answers lookups of stored responses: svcgw serves the
// Responses API statelessly and keeps no response objects.
func (s *Server) handleStateless() authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		responsesSurface.writeError(w, &llm.Error{Kind: llm.KindNotFound, Param: "response_id",
			Message: "responses are not stored: this gateway serves the Responses API statelessly (send store: false and replay the conversation)"})
	}
}

// handleGenContent dispatches POST …/v1beta/models/{model}:{method}; the
// ServeMux cannot match a wildcard followed by ":method" in one segment.
func (s *Server) handleGenContent() authedHandler {
	infer := s.handleInference(genContentSurface)
	count := s.handleCount(genContentSurface, gencontent.CountTokens)
	return func(w http.ResponseWriter, r *http.Request, caller store.Key) {
		_, method, err := gencontent.ParseModelMethod(r.PathValue("rest"))
		if err != nil {
			genContentSurface.writeError(w, err)
			return
		}
		switch method {
		case "countTokens":
			count(w, r, caller)
		default: // generateContent, streamGenerateContent (ParseModelMethod vetted it)
			infer(w, r, caller)
		}
	}
}

// handleGenContentModels lists models (or one) in the generate-content shape.
func (s *Server) handleGenContentModels() authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		lim := s.router.Limits()
		if rest := r.PathValue("rest"); rest != "" {
			gencontent.WriteModel(w, rest, lim.ContextLength, lim.MaxCompletionTokens)
			return
		}
		gencontent.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
	}
}

// modelsSurface picks the surface whose SDK called the shared /v1/models
// path: the messages version header marks Anthropic's SDKs, a Gemini key
// header or key= query Google's, and anything else is chat-completions.
func modelsSurface(r *http.Request) surface {
	switch {
	case r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Msgs-Version") != "":
		return messagesSurface
	case r.Header.Get("X-Goog-Api-Key") != "" || r.Header.Get("X-Gen-Api-Key") != "" || r.URL.Query().Has("key"):
		return genContentSurface
	}
	return chatSurface
}

func (s *Server) withModelsAuth(next authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.withAuth(modelsSurface(r), next).ServeHTTP(w, r)
	})
}

// handleModels serves GET /v1/models (and /v1/models/{id}) in the shape of
// the calling SDK, with limits read from the routed backends now.
func (s *Server) handleModels() authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		lim := s.router.Limits()
		id := r.PathValue("model")
		switch modelsSurface(r).name {
		case llm.SurfaceMessages:
			if id != "" {
				messages.WriteModel(w, id, lim.ContextLength, lim.MaxCompletionTokens)
				return
			}
			messages.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
		case llm.SurfaceGenContent:
			if id != "" {
				gencontent.WriteModel(w, id, lim.ContextLength, lim.MaxCompletionTokens)
				return
			}
			gencontent.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
		default:
			if id != "" {
				chat.WriteModel(w, id, lim.ContextLength, lim.MaxCompletionTokens)
				return
			}
			chat.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
		}
	}
}
