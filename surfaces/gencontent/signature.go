package gencontent

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/svcgw/svcgw/llm"
)

// Thought signatures.
//
// The canonical model has two opaque replay tokens: a reasoning part's
// Signature (an Anthropic thinking signature, a redacted block's data, a
// Gemini signature) and a tool call's Signature (Gemini's thoughtSignature on
// a functionCall). Whatever backend served the call, the caller must send
// them back unchanged on the next turn, or the backend rejects the history
// (docs/translation.md#reasoning). The Gemini wire has one slot for them: the
// thoughtSignature of a part, which go-genai decodes as standard base64 and
// returns on the next call.
//
// Three things rule out writing the canonical signature there as is:
//
//   - it may not be standard base64 (OpenAI's encrypted reasoning is
//     URL-safe), and go-genai fails the whole response on bad base64;
//   - a part carries one signature, but a functionCall may need its own plus
//     the one closing the reasoning before it;
//   - the SDKs' chat helpers keep only parts that hold data (text, a call…):
//     a part with nothing but a signature is left out of the history, so
//     signatures must ride on data parts, as Gemini's own do. When the
//     caller did not ask for thoughts (includeThoughts), the reasoning text
//     itself is not shown, yet an Anthropic backend needs it back, with its
//     signature, to accept a tool loop.
//
// So the thoughtSignature we write is our own envelope: standard base64 of a
// small JSON object that lists the reasoning blocks ending before the part
// (with their text when it was not shown), the part's own closing signature
// (a shown thought part), the call's signature (a functionCall), and, on the
// turn's last data part, the blocks that came after it. A signature we did
// not write (a foreign one, or garbage) cannot be valid on any backend we
// route to, so the decoder drops it.

// sigEnvelope is the decoded thoughtSignature of one part.
type sigEnvelope struct {
	V      int        `json:"v"`           // sigVersion
	Blocks []sigBlock `json:"b,omitempty"` // reasoning that ends before this part, in order
	Own    *sigBlock  `json:"o,omitempty"` // closes this thought part's block
	Call   string     `json:"c,omitempty"` // this functionCall's own signature
	After  []sigBlock `json:"a,omitempty"` // reasoning after the turn's last data part
}

// sigBlock is one closed reasoning block.
type sigBlock struct {
	Text      string `json:"t,omitempty"` // the reasoning text, when it was not shown
	Signature string `json:"s,omitempty"`
	Redacted  bool   `json:"x,omitempty"`
	// Merge says the block's text went out as thought parts before: the
	// signature closes them, rather than standing for a block of its own.
	Merge bool `json:"m,omitempty"`
}

const sigVersion = 1

// encodeSignature returns the thoughtSignature of a part, "" when there is
// nothing to carry.
func encodeSignature(env sigEnvelope) string {
	if len(env.Blocks) == 0 && env.Own == nil && env.Call == "" && len(env.After) == 0 {
		return ""
	}
	env.V = sigVersion
	b, _ := json.Marshal(env) // plain strings and bools: cannot fail
	return base64.StdEncoding.EncodeToString(b)
}

// decodeSignature reads a thoughtSignature; ok is false when it is absent or
// not one of ours.
func decodeSignature(s string) (env sigEnvelope, ok bool) {
	if s == "" {
		return env, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return env, false
	}
	if err := json.Unmarshal(b, &env); err != nil || env.V != sigVersion {
		return sigEnvelope{}, false
	}
	return env, true
}

// modelTurn builds the canonical parts of one model turn, applying the
// envelopes in the order the encoder wrote them.
type modelTurn struct {
	parts    []llm.Part
	contents int // the caller's contents this turn was built from

	// text is the text of the last part, an open reasoning block, while
	// buffered: a replayed block comes as one content a streamed chunk,
	// and adding each chunk to a string copied the block so far every
	// time (n chunks cost n² bytes).
	text     []byte
	buffered bool
}

// add appends a part.
func (t *modelTurn) add(p llm.Part) {
	t.settle()
	t.parts = append(t.parts, p)
}

// settle puts the buffered text in its part.
func (t *modelTurn) settle() {
	if t.buffered {
		t.parts[len(t.parts)-1].Text = string(t.text)
		t.buffered = false
	}
}

// result is the turn's parts.
func (t *modelTurn) result() []llm.Part {
	t.settle()
	return t.parts
}

// openReasoning returns the trailing reasoning part if it is still open: no
// signature has closed it yet.
func (t *modelTurn) openReasoning() *llm.Part {
	if n := len(t.parts); n > 0 {
		p := &t.parts[n-1]
		if p.Type == llm.PartReasoning && p.Signature == "" && !p.Redacted {
			return p
		}
	}
	return nil
}

// thought adds reasoning text. Consecutive open thought parts are one block:
// a stream sends a block's text in many chunks, and the chat helpers keep
// each chunk as a separate content.
func (t *modelTurn) thought(text string) {
	if text == "" {
		return
	}
	if p := t.openReasoning(); p != nil {
		if !t.buffered {
			t.text = append(t.text[:0], p.Text...)
			t.buffered = true
		}
		t.text = append(t.text, text...)
		return
	}
	t.add(llm.Part{Type: llm.PartReasoning, Text: text})
}

// close applies a block: a merge closes the open thought text with its
// signature; anything else is a reasoning block of its own. A block that
// closes nothing (no signature, not redacted; we never write one) is plain
// thought text.
func (t *modelTurn) close(b sigBlock) {
	switch {
	case b.Signature == "" && !b.Redacted:
		t.thought(b.Text)
		return
	case b.Merge:
		if p := t.openReasoning(); p != nil {
			t.settle()
			p.Signature, p.Redacted = b.Signature, b.Redacted
			return
		}
	}
	t.add(llm.Part{Type: llm.PartReasoning, Text: b.Text, Signature: b.Signature, Redacted: b.Redacted})
}

// sigWriter builds the envelopes of a model turn on the way out. Blocks
// wait in pending until the next data part carries them.
type sigWriter struct {
	pending []sigBlock
}

// take returns the thoughtSignature for the next data part and empties
// pending.
func (sw *sigWriter) take(own *sigBlock, call string) string {
	s := encodeSignature(sigEnvelope{Blocks: sw.pending, Own: own, Call: call})
	sw.pending = nil
	return s
}

// finish places the blocks still pending when a turn ends: after the last
// data part when there is one, else on a part of their own. That bare part
// holds no data, which the SDKs' chat helpers drop from their history; but
// then the turn has no data at all, and they drop it anyway.
func (sw *sigWriter) finish(parts []part) []part {
	if len(sw.pending) == 0 {
		return parts
	}
	if n := len(parts); n > 0 {
		last := &parts[n-1]
		env, _ := decodeSignature(last.ThoughtSignature)
		env.After = append(env.After, sw.pending...)
		last.ThoughtSignature = encodeSignature(env)
		sw.pending = nil
		return parts
	}
	return append(parts, part{ThoughtSignature: sw.take(nil, "")})
}

// modelParts encodes the canonical parts of a model turn (a complete reply,
// or a model turn of history): reasoning shown as thought parts when asked
// for, text, function calls and inline media, with every signature in an
// envelope on a data part.
func modelParts(parts []llm.Part, show bool) []part {
	var sw sigWriter
	var out []part
	for _, p := range parts {
		switch p.Type {
		case llm.PartReasoning:
			if show && p.Text != "" && !p.Redacted {
				var own *sigBlock
				if p.Signature != "" {
					own = &sigBlock{Signature: p.Signature}
				}
				out = append(out, part{Text: p.Text, Thought: true, ThoughtSignature: sw.take(own, "")})
				continue
			}
			// Hidden, or nothing to show: only the signature (with the
			// text that goes with it) needs to come back. Reasoning with no
			// signature has nothing to replay and is dropped.
			if p.Signature != "" || p.Redacted {
				sw.pending = append(sw.pending, sigBlock{Text: p.Text, Signature: p.Signature, Redacted: p.Redacted})
			}
		case llm.PartText:
			if p.Text != "" {
				out = append(out, part{Text: p.Text, ThoughtSignature: sw.take(nil, "")})
			}
		case llm.PartToolCall:
			if p.ToolCall != nil {
				out = append(out, callPart(p.ToolCall, sw.take(nil, p.ToolCall.Signature)))
			}
		case llm.PartImage, llm.PartDocument:
			if p.URL == "" {
				out = append(out, part{InlineData: &blob{MIMEType: mediaType(p), Data: base64.StdEncoding.EncodeToString(p.Data)},
					ThoughtSignature: sw.take(nil, "")})
			}
		}
	}
	return sw.finish(out)
}

func mediaType(p llm.Part) string {
	if p.MediaType != "" {
		return p.MediaType
	}
	if p.Type == llm.PartDocument {
		return "application/pdf"
	}
	return "application/octet-stream"
}

// callPart encodes a tool call as a functionCall part.
func callPart(tc *llm.ToolCall, sig string) part {
	return part{FunctionCall: &functionCall{ID: tc.ID, Name: tc.Name, Args: callArgs(tc.Arguments)}, ThoughtSignature: sig}
}

// callArgs makes the arguments a JSON object, as the SDKs require: empty
// becomes {}, and anything that is not an object (a model that produced
// broken JSON) is wrapped as {"_raw": "<text>"} rather than failing the
// whole reply (docs/translation.md#tool-calls-and-results, policy).
func callArgs(raw []byte) json.RawMessage {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return json.RawMessage("{}")
	}
	if s[0] == '{' && json.Valid([]byte(s)) {
		return llm.CompactJSON([]byte(s))
	}
	b, _ := json.Marshal(map[string]string{"_raw": string(raw)})
	return b
}
