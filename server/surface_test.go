package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// echoCodec is a wire format of the test's own, to show what a new surface
// takes: this type, and mounting it (one line in routes). Its request is
// {"model":…, "prompts":[…], "stream":…}; its reply {"id":…, "text":…}; its
// stream "data: <text>" lines; its errors {"echo_error":{"kind":…,"param":…}}.
type echoCodec struct{}

func (echoCodec) Surface() llm.Surface { return "echo" }

func (echoCodec) Routes() []surface.Route {
	return []surface.Route{
		{Method: http.MethodPost, Path: "/v1/echo", Endpoint: surface.Generate},
		{Method: http.MethodPost, Path: "/v1/echo/count", Endpoint: surface.CountTokens},
		{Method: http.MethodGet, Path: "/v1/echo/models/{model...}", Endpoint: surface.Models},
	}
}

func (echoCodec) Fields() surface.Fields {
	return surface.Fields{Messages: "prompts", System: "preamble", Tools: "tools", Schema: "schema", Turn: "prompts"}
}

func (echoCodec) NewID() string { return llm.NewID("echo_", 24) }

func (echoCodec) DecodeRequest(_ *http.Request, body []byte) (*llm.Request, error) {
	var in struct {
		Model   string   `json:"model"`
		Prompts []string `json:"prompts"`
		Stream  bool     `json:"stream"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Model == "" || len(in.Prompts) == 0 {
		return nil, llm.InvalidParam("body", "send a model and prompts")
	}
	req := &llm.Request{Model: in.Model, Stream: in.Stream, IncludeUsage: true, MaxTokens: 16}
	for _, p := range in.Prompts {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(p)}})
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.TextPart("ok")}})
	}
	req.Messages = req.Messages[:len(req.Messages)-1]
	return req, nil
}

func (echoCodec) WriteResponse(w http.ResponseWriter, _ *llm.Request, resp *llm.Response) error {
	var text strings.Builder
	for _, p := range resp.Content {
		text.WriteString(p.Text)
	}
	return surface.WriteJSON(w, http.StatusOK, map[string]string{"id": resp.ID, "text": text.String()})
}

func (echoCodec) NewStream(*llm.Request, string, time.Time) surface.Stream { return echoStream{} }

func (echoCodec) WriteError(w http.ResponseWriter, err error) {
	e := llm.AsError(err)
	_ = surface.WriteJSON(w, e.Kind.Status(), map[string]any{"echo_error": map[string]string{"kind": string(e.Kind), "param": e.Param}})
}

func (echoCodec) CountTokens(w http.ResponseWriter, r *http.Request, body []byte) {
	req, err := echoCodec{}.DecodeRequest(r, body)
	if err != nil {
		echoCodec{}.WriteError(w, err)
		return
	}
	_ = surface.WriteJSON(w, http.StatusOK, map[string]int{"tokens": req.InputTokens()})
}

func (echoCodec) WriteModels(w http.ResponseWriter, lim surface.Limits) {
	_ = surface.WriteJSON(w, http.StatusOK, map[string]any{"echo_models": []string{"echo-1"}, "context": lim.ContextLength})
}

func (echoCodec) WriteModel(w http.ResponseWriter, id string, lim surface.Limits) {
	_ = surface.WriteJSON(w, http.StatusOK, map[string]any{"echo_model": id, "context": lim.ContextLength})
}

func (echoCodec) Claims(r *http.Request) bool { return r.Header.Get("X-Echo-Version") != "" }

type echoStream struct{}

func (echoStream) Start(io.Writer) error { return nil }

func (echoStream) Event(w io.Writer, ev llm.Event) error {
	switch ev.Type {
	case llm.EventTextDelta:
		_, err := fmt.Fprintf(w, "data: %s\n\n", ev.Text)
		return err
	case llm.EventFinish:
		_, err := io.WriteString(w, "data: [END]\n\n")
		return err
	}
	return nil
}

func (echoStream) Error(w io.Writer, e *llm.Error) error {
	_, err := fmt.Fprintf(w, "data: [ERROR %s]\n\n", e.Kind)
	return err
}

func TestSurface_ANewSurfaceIsItsCodecAndOneLine(t *testing.T) {
	gw := newTestGateway(t, func(o *Options) { o.Bounds = Bounds{MaxMessages: 3} })
	// What routes does for every surface, and all a new one needs.
	gw.Server.surfaces = append(gw.Server.surfaces, echoCodec{})
	gw.Server.mount(gw.Server.surfaceRoutes(echoCodec{}))

	t.Run("a call runs the whole pipeline and is recorded under its surface", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/echo", `{"model":"svc-fusion","prompts":["Say hi."]}`)
		is.Equal(resp.StatusCode, http.StatusOK)             // 200
		is.True(resp.Header.Get("X-SVC-Request-Type") != "") // classified
		var out struct{ ID, Text string }
		is.NoErr(json.Unmarshal(body, &out))
		is.True(strings.HasPrefix(out.ID, "echo_"))   // the codec's id
		is.True(out.Text != "")                       // the fixture's reply
		is.NoErr(gw.Store.Sync(context.Background())) // the ledger writer batches
		g, err := gw.Store.GenerationByID(context.Background(), out.ID)
		is.NoErr(err)               // recorded
		is.Equal(g.Surface, "echo") // under the codec's name
		is.True(g.Cost > 0)         // and billed
	})
	t.Run("a stream goes through the codec's encoder", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/v1/echo", `{"model":"svc-fusion","prompts":["Say hi."],"stream":true}`)
		is.Equal(resp.StatusCode, http.StatusOK)
		is.Equal(resp.Header.Get("Content-Type"), "text/event-stream")
		is.True(strings.HasSuffix(string(body), "data: [END]\n\n")) // the encoder's terminator
	})
	t.Run("a bound names the codec's field", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/echo", `{"model":"m","prompts":["a","b","c"]}`)
		is.Equal(resp.StatusCode, http.StatusBadRequest)
		is.Equal(string(body), `{"echo_error":{"kind":"invalid_request","param":"prompts"}}`+"\n")
	})
	t.Run("authentication fails in the codec's envelope", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/echo/count", `{}`, "Authorization", "Bearer llm_live_wrong")
		is.Equal(resp.StatusCode, http.StatusUnauthorized)
		is.True(strings.Contains(string(body), `"echo_error"`))
	})
	t.Run("count tokens", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/echo/count", `{"model":"m","prompts":["Say hi."]}`)
		is.Equal(resp.StatusCode, http.StatusOK)
		is.True(strings.HasPrefix(string(body), `{"tokens":`))
	})
	t.Run("its models list, at its path and at the shared one when its headers claim the call", func(t *testing.T) {
		is := is.New(t)
		_, body := gw.do(t, http.MethodGet, "/svc/v1/echo/models/", "")
		is.True(strings.Contains(string(body), `"echo_models"`))
		_, body = gw.do(t, http.MethodGet, "/svc/v1/echo/models/echo-2", "")
		is.True(strings.Contains(string(body), `"echo_model":"echo-2"`))
		_, body = gw.do(t, http.MethodGet, "/svc/v1/models", "", "X-Echo-Version", "1")
		is.True(strings.Contains(string(body), `"echo_models"`))
		_, body = gw.do(t, http.MethodGet, "/svc/v1/nowhere", "", "X-Echo-Version", "1")
		is.True(strings.Contains(string(body), `"echo_error":{"kind":"not_found"`)) // the 404 too
	})
}

// countless routes a count-tokens endpoint without being a Counter.
type countless struct{ echoCodec }

func (countless) CountTokens() {} // not surface.Counter's method

func (countless) Routes() []surface.Route {
	return []surface.Route{{Method: http.MethodPost, Path: "/v1/countless", Endpoint: surface.CountTokens}}
}

func TestSurface_ARouteToAnEndpointTheCodecLacksIsRefusedAtStart(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	defer func() {
		is.True(recover() != nil) // surfaceRoutes panics
	}()
	gw.Server.surfaceRoutes(countless{})
}
