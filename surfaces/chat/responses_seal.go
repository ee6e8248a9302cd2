package chat

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Item references.
//
// A Responses caller may replay an earlier output item by id alone,
// {"type":"item_reference","id":…}: the AI SDK's OpenAI provider does so for
// every assistant message and reasoning item unless store is false. Both
// kinds of reply resolve, and the request alone decides nothing: the same
// body streams token by token and replays by reference from any client.
//
// A whole (non-streamed) reply's item ids carry their items: an id is its
// prefix (msg_, rs_, fc_, ctc_) and the item sealed (Sealer: authenticated
// encryption under a key every instance on the database shares), and a
// reference opens it again. Only what rebuilds the item is sealed (a
// message's text, a reasoning item's summary and signature, a call's id,
// name and arguments), deflated when that is shorter. Such ids are about as
// long as their items (measured on prose: a 40-character answer's id is 138
// characters, a 1,000-character answer's 878), and need nothing kept.
// Sealing cannot be forged, so a reference can only replay what svcgw
// itself returned.
//
// A streamed item's id is sent before its content exists, so it cannot
// carry it: streamed items get plain ids (msg_<response>_<n>), and the
// stream hands the server the finished items (Items), which it keeps in the
// ledger with the call's generation record, for the calling account, as
// long as it keeps generations (README "Clients"). A reference to a plain id
// is looked up there (DecodeRequestItems), all of a request's at once.
//
// A reference that resolves neither way (never issued by svcgw, altered,
// kept for another account, or older than the retention window) is a 400
// naming the item, except a reasoning item's, which is dropped: reasoning is
// an aid to the backend that issued it, and a conversation goes on without
// it.

// references resolves a request's item references: by opening sealed ids,
// or from the kept items looked up for it.
type references struct {
	sealer Sealer
	kept   map[string][]byte
}

// lookUpReferences looks up, in one call to items, the kept items that the
// input's references (and the ids of reasoning items replayed without their
// signature) name, when their ids are not sealed ones.
func lookUpReferences(ctx context.Context, sealer Sealer, items surface.ItemSource, in input) (references, error) {
	refs := references{sealer: sealer}
	if items == nil {
		return refs, nil
	}
	var ids []string
	for _, it := range in.items {
		named := it.Type == "item_reference" || it.Type == "reasoning" && it.EncryptedContent == ""
		if !named || it.ID == "" {
			continue
		}
		if plainID(it.ID) {
			ids = append(ids, it.ID)
		}
	}
	if len(ids) == 0 {
		return refs, nil
	}
	kept, err := items(ctx, ids)
	if err != nil {
		return refs, err
	}
	refs.kept = kept
	return refs, nil
}

// plainID reports whether id has the shape of a streamed item's id, the
// only ids kept: its prefix, the response id's 24 characters, "_" and the
// item's index (outputItems). Any other (a sealed id, another API's) is
// never looked up, so replaying foreign ids costs no query.
func plainID(id string) bool {
	for _, prefix := range idPrefixes {
		rest, ok := strings.CutPrefix(id, prefix)
		if !ok {
			continue
		}
		resp, n, ok := strings.Cut(rest, "_")
		if !ok || len(resp) != 24 || n == "" {
			return false
		}
		for _, c := range resp + n {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return false
			}
		}
		for _, c := range n {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	return false
}

// open returns the item id names: sealed in it, or kept.
func (r references) open(id string) (typ string, it sealedItem, ok bool) {
	if typ, it, ok = openID(r.sealer, id); ok {
		return typ, it, true
	}
	data, kept := r.kept[id]
	if !kept || typ == "" {
		return typ, it, false
	}
	return typ, it, json.Unmarshal(data, &it) == nil
}

// Sealer seals and opens tokens (package seal's Box); the surface names what
// it needs without importing it.
type Sealer interface {
	Seal(purpose string, plaintext []byte) string
	Open(purpose, token string) ([]byte, error)
}

// sealedItem is what an item id carries, by item type: a message's texts; a
// reasoning item's summary, signature and redacted flag; a call's id, name
// (the backend's) and arguments.
type sealedItem struct {
	Texts     []string `json:"t,omitempty"`
	Signature string   `json:"s,omitempty"`
	Redacted  bool     `json:"x,omitempty"`
	CallID    string   `json:"c,omitempty"`
	Name      string   `json:"n,omitempty"`
	Arguments string   `json:"a,omitempty"`
}

// The first byte of a sealed payload.
const (
	payloadJSON    = 1 // JSON follows
	payloadDeflate = 2 // deflated JSON follows
)

// idPrefixes maps item types to their id prefixes, which name the purpose a
// reference is opened for.
var idPrefixes = map[string]string{
	"message": "msg_", "reasoning": "rs_", "function_call": "fc_", "custom_tool_call": "ctc_",
}

// sealID returns the id of an item that carries it.
func sealID(s Sealer, typ string, it sealedItem) string {
	js, _ := json.Marshal(it) // strings and a bool: cannot fail
	payload := append([]byte{payloadJSON}, js...)
	if len(js) > 64 {
		var b bytes.Buffer
		b.WriteByte(payloadDeflate)
		zw, _ := flate.NewWriter(&b, flate.BestCompression) // a valid level: no error
		_, _ = zw.Write(js)
		_ = zw.Close()
		if b.Len() < len(payload) {
			payload = b.Bytes()
		}
	}
	return idPrefixes[typ] + s.Seal(typ, payload)
}

// maxPayload bounds what an opened id may inflate to.
const maxPayload = 16 << 20

// openID opens an item id; ok is false when it does not carry an item.
func openID(s Sealer, id string) (typ string, it sealedItem, ok bool) {
	for t, prefix := range idPrefixes {
		if tok, found := strings.CutPrefix(id, prefix); found {
			typ = t
			if s == nil {
				return typ, it, false
			}
			payload, err := s.Open(t, tok)
			if err != nil || len(payload) == 0 {
				return typ, it, false
			}
			js := payload[1:]
			switch payload[0] {
			case payloadJSON:
			case payloadDeflate:
				if js, err = io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(js)), maxPayload)); err != nil {
					return typ, it, false
				}
			default:
				return typ, it, false
			}
			return typ, it, json.Unmarshal(js, &it) == nil
		}
	}
	return "", it, false
}

// sealedOf is what item it's id carries.
func sealedOf(it outputItem) sealedItem {
	switch it.Type {
	case "message":
		var texts []string
		for _, c := range it.Content {
			texts = append(texts, c.Text)
		}
		return sealedItem{Texts: texts}
	case "reasoning":
		var texts []string
		for _, sp := range it.Summary {
			texts = append(texts, sp.Text)
		}
		return sealedItem{Texts: texts, Signature: it.EncryptedContent, Redacted: it.redacted}
	default:
		args := it.Arguments
		if it.Type == "custom_tool_call" {
			args = string(freeformArguments(it.Input))
		}
		return sealedItem{CallID: it.CallID, Name: it.backendName, Arguments: args}
	}
}

// resolveReference replays the item an item_reference names as assistant
// turn parts. A reasoning item that cannot be resolved is dropped; any other
// is a 400 naming it.
func resolveReference(refs references, f, id string, req *llm.Request) error {
	typ, it, ok := refs.open(id)
	if !ok {
		if typ == "reasoning" {
			return nil
		}
		shown := id
		if len(shown) > 48 {
			shown = shown[:48] + "…"
		}
		return llm.InvalidParam(f+".id", "%s: item_reference %q cannot be resolved: it names no item this gateway returned to this account, or one older than it keeps streamed items; send the item itself instead (with the AI SDK, providerOptions.openai.store = false)", f, shown)
	}
	switch typ {
	case "message":
		var parts []llm.Part
		for _, t := range it.Texts {
			parts = append(parts, llm.TextPart(t))
		}
		if len(parts) > 0 {
			addTurn(req, llm.RoleAssistant, parts...)
		}
	case "reasoning":
		p := llm.Part{Type: llm.PartReasoning, Text: strings.Join(it.Texts, "\n"), Signature: it.Signature, Redacted: it.Redacted}
		addTurn(req, llm.RoleAssistant, p)
	default:
		args := json.RawMessage(it.Arguments)
		if !json.Valid(args) {
			return fmt.Errorf("%s: sealed arguments are not JSON", f) // cannot happen: we sealed them
		}
		addTurn(req, llm.RoleAssistant, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args}})
	}
	return nil
}
