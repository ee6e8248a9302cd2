package server

import (
	"io"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// codec is what a wire-format package (surfaces/chat, surfaces/messages,
// surfaces/gencontent) provides for one inference endpoint. Surfaces satisfy
// it structurally, so they never import server. S is the surface's concrete
// stream encoder type.
type codec[S streamEncoder] interface {
	// Surface names the wire format (for records and logs).
	Surface() llm.Surface
	// NewID returns a fresh gateway-issued id in the format's style
	// (chatcmpl-…, resp_…, msg_…); generation and feedback look calls up by it.
	NewID() string
	// DecodeRequest turns a native request body into a canonical request, or
	// returns an *llm.Error of kind invalid_request.
	DecodeRequest(r *http.Request, body []byte) (*llm.Request, error)
	// WriteResponse encodes a complete reply (status 200) in the native format.
	WriteResponse(w http.ResponseWriter, req *llm.Request, resp *llm.Response) error
	// NewStream returns the encoder of one streamed reply.
	NewStream(req *llm.Request, id string, created time.Time) S
	// WriteError writes err in the native envelope with its HTTP status and
	// retry headers. Anything that is not an *llm.Error is an internal error.
	WriteError(w http.ResponseWriter, err error)
}

// streamEncoder turns canonical stream events into native SSE frames.
// Each method writes complete frames (ending in a blank line) to w; the
// server flushes after each call.
type streamEncoder interface {
	// Start writes the frames that open the stream (message_start,
	// response.created, …); it may write nothing.
	Start(w io.Writer) error
	// Event writes the frames for one event. llm.EventFinish is the last
	// event and ends the stream with the format's success terminator.
	Event(w io.Writer, ev llm.Event) error
	// Error writes the format's in-stream error frame after a failure
	// mid-stream; the stream ends there without a success terminator.
	Error(w io.Writer, err *llm.Error) error
}

// surface is a codec with its stream encoder type erased, so the pipeline
// can hold any of them.
type surface struct {
	name          llm.Surface
	newID         func() string
	decode        func(r *http.Request, body []byte) (*llm.Request, error)
	writeResponse func(w http.ResponseWriter, req *llm.Request, resp *llm.Response) error
	newStream     func(req *llm.Request, id string, created time.Time) streamEncoder
	writeError    func(w http.ResponseWriter, err error)
}

func adapt[S streamEncoder](c codec[S]) surface {
	return surface{
		name:          c.Surface(),
		newID:         c.NewID,
		decode:        c.DecodeRequest,
		writeResponse: c.WriteResponse,
		newStream: func(req *llm.Request, id string, created time.Time) streamEncoder {
			return c.NewStream(req, id, created)
		},
		writeError: c.WriteError,
	}
}
