package server

import (
	"github.com/svcgw/svcgw/llm"
)

// Reasoning signatures.
//
// A backend's reasoning signatures (an Anthropic thinking signature or
// redacted_thinking data, a Gemini thoughtSignature) are vendor bytes: they
// would tell a caller which backend answered, and their format is the
// vendor's. So every signature a caller gets, on every surface, is sealed
// with the server's key (package seal), and every signature a caller sends
// back is opened before the request goes upstream. One that does not open
// (altered, foreign, or from another svcgw) is dropped, which the backends
// treat as they treat any signature not their own: the reasoning it closed
// is not sent upstream.

// sigPurpose is what signatures are sealed for.
const sigPurpose = "signature"

// openSignatures opens the signatures of a decoded request in place.
func (s *Server) openSignatures(req *llm.Request) {
	open := func(tok string) string {
		if tok == "" {
			return ""
		}
		sig, err := s.sealer.Open(sigPurpose, tok)
		if err != nil {
			return ""
		}
		return string(sig)
	}
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		for j := range parts {
			p := &parts[j]
			if p.Signature != "" {
				p.Signature = open(p.Signature)
			}
			if p.ToolCall != nil && p.ToolCall.Signature != "" {
				tc := *p.ToolCall
				tc.Signature = open(tc.Signature)
				p.ToolCall = &tc
			}
		}
	}
}

// sealSignature seals one signature; "" stays "".
func (s *Server) sealSignature(sig string) string {
	if sig == "" {
		return ""
	}
	return s.sealer.Seal(sigPurpose, []byte(sig))
}

// sealResponse seals the signatures of a complete reply in place.
func (s *Server) sealResponse(resp *llm.Response) {
	for i := range resp.Content {
		p := &resp.Content[i]
		p.Signature = s.sealSignature(p.Signature)
		if p.ToolCall != nil && p.ToolCall.Signature != "" {
			tc := *p.ToolCall
			tc.Signature = s.sealSignature(tc.Signature)
			p.ToolCall = &tc
		}
	}
}

// sealEvent seals the signatures an event carries.
func (s *Server) sealEvent(ev *llm.Event) {
	ev.Signature = s.sealSignature(ev.Signature)
	if ev.ToolCall != nil && ev.ToolCall.Signature != "" {
		tc := *ev.ToolCall
		tc.Signature = s.sealSignature(tc.Signature)
		ev.ToolCall = &tc
	}
}
