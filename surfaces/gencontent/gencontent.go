// Package gencontent serves the generate-content wire format (the Gemini
// Developer API, v1beta) so that Google's official Gen AI SDKs work against
// svcgw unmodified: generateContent, streamGenerateContent (SSE),
// countTokens, the models list, and the native error envelope.
//
// It decodes native requests into llm.Request and encodes llm.Response and
// llm.Event values back; it holds only wire types and pure converters. The
// wire details it follows are in docs/wire/generate-content.md. It imports
// only llm and surface (and the standard library): never server, upstream
// or store.
package gencontent

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// The methods a model path can name (…/models/{model}:{method}).
const (
	MethodGenerate       = "generateContent"
	MethodStreamGenerate = "streamGenerateContent"
	MethodCountTokens    = "countTokens"
	MethodEmbed          = "embedContent"
	MethodBatchEmbed     = "batchEmbedContents"
)

// Codec is the generate-content surface.
type Codec struct{}

// Surface names the wire format.
func (Codec) Surface() llm.Surface { return llm.SurfaceGenContent }

// Routes lists the model methods (…/models/{model}:{method}: generate,
// stream or count) and the models list, under /v1beta and, for the genai
// SDKs configured with APIVersion "v1", the methods under /v1 too (the
// /v1/models list is the path the SDKs share; see Claims).
func (Codec) Routes() []surface.Route {
	return []surface.Route{
		{Method: http.MethodPost, Path: "/v1beta/models/{rest...}", Pick: pickMethod, Serves: pickServes},
		{Method: http.MethodPost, Path: "/v1/models/{rest...}", Pick: pickMethod, Serves: pickServes},
		{Method: http.MethodGet, Path: "/v1beta/models", Endpoint: surface.Models},
		{Method: http.MethodGet, Path: "/v1beta/models/{model...}", Endpoint: surface.Models},
	}
}

// pickServes is what pickMethod's routes serve.
const pickServes = ":generateContent, :streamGenerateContent (inference), :embedContent, :batchEmbedContents (embeddings), :countTokens (count tokens)"

// pickMethod routes POST …/models/{model}:{method}: the ServeMux cannot
// match a wildcard followed by ":method" in one segment.
func pickMethod(r *http.Request) (surface.Endpoint, error) {
	_, method, err := ParseModelMethod(r.PathValue("rest"))
	if err != nil {
		return 0, err
	}
	switch method {
	case MethodCountTokens:
		return surface.CountTokens, nil
	case MethodEmbed, MethodBatchEmbed:
		return surface.Embed, nil
	}
	return surface.Generate, nil // generateContent, streamGenerateContent
}

// Fields names the bounded fields in the API's words.
func (Codec) Fields() surface.Fields {
	return surface.Fields{Messages: "contents", System: "systemInstruction", Tools: "tools",
		Schema: "generationConfig.responseSchema", Turn: "contents"}
}

// Claims reports whether r carries its key the way only Google's SDKs do:
// in x-goog-api-key (x-gen-api-key is the contract's spelling, docs/contract.md#authentication) or ?key=.
func (Codec) Claims(r *http.Request) bool {
	return r.Header.Get("X-Goog-Api-Key") != "" || r.Header.Get("X-Gen-Api-Key") != "" || r.URL.Query().Has("key")
}

// NewID returns a fresh responseId: "gw" and 22 URL-safe characters (128
// random bits). Gemini's own ids are unprefixed base64url strings of about
// that length; the prefix marks ours, and the alphabet needs no escaping in
// the generation lookup's ?id= query.
func (Codec) NewID() string { return llm.NewID("gw", 22) }

// NewStream returns the encoder of one streamed reply.
func (Codec) NewStream(req *llm.Request, id string, created time.Time) surface.Stream {
	return newStream(req, id)
}

// ParseModelMethod splits the part of a path after "/v1beta/models/" into
// the model id and the method: "gemini-2.5-flash:generateContent" gives
// ("gemini-2.5-flash", "generateContent"). The SDKs glue the method to the
// last segment with ":", which a ServeMux wildcard cannot match, so the
// split is on the last ":". A leading "models/" (a client that sends the
// resource name twice) is dropped. An unknown or missing method is a
// not_found error, an empty model an invalid_request one.
func ParseModelMethod(rest string) (model, method string, err error) {
	model, method, ok := cutLast(rest, ":")
	if !ok {
		return "", "", &llm.Error{Kind: llm.KindNotFound,
			Message: "no method in the path: call models/{model}:generateContent, :streamGenerateContent, :countTokens, :embedContent or :batchEmbedContents"}
	}
	switch method {
	case MethodGenerate, MethodStreamGenerate, MethodCountTokens, MethodEmbed, MethodBatchEmbed:
	default:
		return "", "", &llm.Error{Kind: llm.KindNotFound,
			Message: "method " + quote(method) + " is not supported: use generateContent, streamGenerateContent, countTokens, embedContent or batchEmbedContents"}
	}
	model = strings.TrimPrefix(model, "models/")
	if strings.TrimSpace(model) == "" {
		return "", "", &llm.Error{Kind: llm.KindInvalidRequest, Param: "model",
			Message: "the model id in the path is empty: call models/{model}:" + method}
	}
	return model, method, nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// quote renders a caller-supplied value for an error message: quoted, and
// cut short so a huge value cannot blow up the message.
func quote(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return strconv.Quote(s)
}
