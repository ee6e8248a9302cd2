package server

import (
	"net/http"
	"strconv"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/classify"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// kind is what a billable endpoint does its own way inside the one
// pipeline (handleInference): how the body becomes the call (its
// canonical request, model id, estimated input, the output its
// reservation covers, its request type and tier), and so how serve
// routes and answers it (serveComplete or serveStream, serveEmbed).
// Everything else is the pipeline's and the same for every kind: the
// ledger check, the request rate, reading the body, the request type
// header, admission (tokens per minute, the reservation against balance
// and caps), metering, the ledger, the access record, the trace, and the
// error envelope of every failure before the reply.
//
// A generation (surface.Generate) and an embeddings call (surface.Embed)
// are the two kinds. Another one (moderation, images) is one more type
// here and its serve function with a case in serve, its codec interface
// in surfaces/surface, its backend interface and Router method in
// upstream, and an endpoint in surfaceRoutes.
type kind interface {
	// codec is the surface whose envelope, ids and record the call has.
	codec() surface.Codec
	// operation names the call's span (telemetry.OperationChat, …).
	operation() string
	// newID is the id of the call's generation record.
	newID() string
	// decode fills in c from the request's body: for a generation c.req,
	// for an embeddings call c.embed and c.embedReply, which say how
	// serve answers it. Its failures are the caller's (invalid_request,
	// too_large), or the database's.
	decode(s *Server, r *http.Request, c *call, body []byte) error
}

// generateKind is the generation kind: a surface's Codec (DecodeRequest,
// WriteResponse, NewStream), served complete or streamed.
type generateKind struct{ sf surface.Codec }

func (g *generateKind) codec() surface.Codec { return g.sf }
func (*generateKind) operation() string      { return telemetry.OperationChat }

// newID is the surface's: the reply carries it (chatcmpl-…, msg_…).
func (g *generateKind) newID() string { return g.sf.NewID() }

// decode decodes, bounds and classifies a generation.
func (g *generateKind) decode(s *Server, r *http.Request, c *call, body []byte) error {
	req, err := s.decode(r, g.sf, c.caller, body)
	if err != nil {
		return err
	}
	s.openSignatures(req)
	if err := c.set.bounds.check(g.sf.Fields(), req); err != nil {
		return err
	}
	// What backends share between calls (prompt caches and their keys,
	// cache affinity) is scoped to the account.
	req.Account = strconv.FormatInt(c.caller.AccountID, 10)
	effort, err := classify.ParseEffort(headerValue(r.Header, "X-Svc-Effort")) // X-SVC-Effort
	if err != nil {
		return err
	}
	c.req, c.model = req, req.Model
	c.input = req.InputTokens()
	req.PromptTokens = c.input // what an upstream's reported input is bounded by
	c.class = classify.Classify(classify.Input{Request: req, Surface: g.sf.Surface(), Effort: effort, InputTokens: c.input})
	c.reserveOut = billing.ReservedOutputTokens(req.MaxTokens, c.set.router.Limits().MaxCompletionTokens, c.set.reserveOut)
	return nil
}

// embedKind is the embeddings kind: a surface's EmbedCodec, never
// streamed, metered on its input alone.
type embedKind struct {
	sf surface.Codec
	ec surface.EmbedCodec
}

func (e *embedKind) codec() surface.Codec { return e.sf }
func (*embedKind) operation() string      { return telemetry.OperationEmbeddings }

// newID is emb- and 24 base62 characters. No vendor's embeddings reply
// carries an id, so the caller learns it from the X-SVC-Generation-Id
// header (serveEmbed).
func (*embedKind) newID() string { return llm.NewID("emb-", 24) }

// decode decodes an embeddings call (the surface holds it to its vendor's
// bounds) and classifies it: type embedding, the tier by effort. Its
// input is svcgw's count of the inputs, which is what is reserved,
// rate-limited and, when the upstream reports none, charged; no output is
// reserved.
func (e *embedKind) decode(s *Server, r *http.Request, c *call, body []byte) error {
	req, reply, err := e.ec.DecodeEmbed(r, body)
	if err != nil {
		return err
	}
	effort, err := classify.ParseEffort(headerValue(r.Header, "X-Svc-Effort")) // X-SVC-Effort
	if err != nil {
		return err
	}
	req.Account = strconv.FormatInt(c.caller.AccountID, 10)
	req.InputTokens = req.CountInputTokens()
	req.Wire = reply.Wire()
	c.embed, c.embedReply, c.model = req, reply, req.Model
	c.input = req.InputTokens
	c.class = classify.Embedding(req.Model, effort)
	return nil
}

// serveEmbed serves an embeddings call (serve): it embeds every input in
// one upstream call (a batch is one call, one record), meters it, and
// writes the vectors with the usage charged.
func (s *Server) serveEmbed(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	upStart := s.now()
	out, rep, err := c.set.router.Embed(ctx, c.class.Type, c.class.Tier, c.embed)
	c.report = rep
	if err != nil {
		return s.upstreamError(ctx, err)
	}
	end := s.now()
	out.Usage.OutputTokens = 0 // an embedding has none to charge
	// Recorded before answering, as a generation is.
	s.meter(ctx, c, meterInput{usage: out.Usage, upstreamFrom: upStart, firstByte: end, end: end})
	out.Usage = c.usage                                // what was charged: the caller's usage figures match its bill
	w.Header()["X-Svc-Generation-Id"] = []string{c.id} // X-SVC-Generation-Id
	if err := c.embedReply.WriteEmbeddings(w, c.model, out); err != nil {
		s.log.Debug("write response", "request_id", RequestID(ctx), "err", err)
	}
	return nil
}

// Compile-time checks that both kinds are kinds.
var _ = []kind{(*generateKind)(nil), (*embedKind)(nil)}
