package messages

import (
	"github.com/svcgw/svcgw/llm"
)

// System messages inside the conversation.
//
// Claude Code sends them by default (betas per-turn-control-2026-07-01 and
// mid-conversation-tool-changes-2026-07-01), falling back to a body without
// them only after a 400. One is {"role":"system", "content": …} anywhere in
// messages, with:
//
//   - text content (a string or text blocks, cache_control allowed): system
//     guidance from that point on, an llm.RoleSystem message which each
//     backend renders in its own protocol;
//   - "clear_at": "next_user_message": guidance that lapses once a user
//     message follows it, so it is dropped when one does;
//   - "output_config": {"effort": …}: the effort from that turn on; the last
//     one in the conversation sets the reply's effort;
//   - tool_addition and tool_removal blocks: the tools the model may call
//     change from that point; the reply is generated at the end, so the
//     tools it may call are the request's with every change applied in
//     order (a tool_addition by tool_reference names a tool the request
//     already declares, which is then kept).
//
// The betas are accepted whether or not anthropic-beta names them, as newer
// optional fields are.

// turnControls are the per-turn controls of a conversation's system
// messages, in order.
type turnControls struct {
	effort string
	tools  []toolChange
}

// toolChange is one tool_addition (def set, or a reference by name) or
// tool_removal.
type toolChange struct {
	remove bool
	name   string
	def    *llm.Tool
}

// decodeSystemTurn decodes a system message in messages: its guidance text,
// whether it lapses at the next user message, and its controls (into tc).
func decodeSystemTurn(o *inMessage, p string, tc *turnControls) (parts []llm.Part, clear bool, err error) {
	if o.ClearAt != nil {
		if err := oneOf(*o.ClearAt, join(p, "clear_at"), "next_user_message"); err != nil {
			return nil, false, err
		}
		clear = true
	}
	if oc := o.OutputConfig; oc != nil {
		if effort := optString(oc.Effort); effort != "" {
			if err := oneOf(effort, join(p, "output_config.effort"), "low", "medium", "high", "xhigh", "max"); err != nil {
				return nil, false, err
			}
			tc.effort = effort
		}
	}
	cp := join(p, "content")
	switch c := o.Content; {
	case !c.sent:
		return nil, clear, missing(cp)
	case c.text != nil:
		if *c.text == "" {
			return nil, clear, nil
		}
		return []llm.Part{llm.TextPart(*c.text)}, clear, nil
	case c.other:
		return nil, clear, llm.InvalidParam(cp, "Input should be a string or an array of content blocks")
	}
	for j, b := range o.Content.blocks {
		bp := index(cp, j)
		typ, err := blockType(b, bp)
		if err != nil {
			return nil, clear, err
		}
		switch typ {
		case "text":
			part, err := decodeText(b, bp)
			if err != nil {
				return nil, clear, err
			}
			if part.CacheControl, err = decodeCacheControl(b.CacheControl, bp); err != nil {
				return nil, clear, err
			}
			parts = append(parts, part)
		case "tool_addition", "tool_removal":
			change, err := decodeToolChange(b, bp, typ == "tool_removal")
			if err != nil {
				return nil, clear, err
			}
			tc.tools = append(tc.tools, change)
		default:
			return nil, clear, llm.InvalidParam(join(bp, "type"), "unsupported content block type %q in a system message: this gateway accepts text, tool_addition and tool_removal", typ)
		}
	}
	return parts, clear, nil
}

// decodeToolChange decodes a tool_addition or tool_removal block: its tool
// is a tool_reference {name} or (additions only) a tool_definition
// {definition}.
func decodeToolChange(b *inBlock, p string, remove bool) (toolChange, error) {
	tp := join(p, "tool")
	to := b.Tool
	if to == nil {
		return toolChange{}, missing(tp)
	}
	typ, err := reqString(to.Type, join(tp, "type"))
	if err != nil {
		return toolChange{}, err
	}
	allowed := []string{"tool_reference", "tool_definition"}
	if remove {
		allowed = allowed[:1]
	}
	if err := oneOf(typ, join(tp, "type"), allowed...); err != nil {
		return toolChange{}, err
	}
	if typ == "tool_reference" {
		name, err := reqString(to.Name, join(tp, "name"))
		return toolChange{remove: remove, name: name}, err
	}
	if to.Definition == nil {
		return toolChange{}, missing(join(tp, "definition"))
	}
	t, err := decodeTool(to.Definition, join(tp, "definition"))
	if err != nil {
		return toolChange{}, err
	}
	return toolChange{name: t.Name, def: &t}, nil
}

// apply sets the reply's effort and tools from the conversation's controls.
func (tc *turnControls) apply(req *llm.Request) {
	if tc.effort != "" {
		if req.Reasoning == nil {
			req.Reasoning = &llm.Reasoning{}
		}
		req.Reasoning.Effort = tc.effort
	}
	for _, c := range tc.tools {
		i := toolIndex(req.Tools, c.name)
		switch {
		case c.remove && i >= 0:
			req.Tools = append(req.Tools[:i:i], req.Tools[i+1:]...)
		case c.def != nil && i >= 0:
			req.Tools[i] = *c.def // a new definition replaces the old
		case c.def != nil:
			req.Tools = append(req.Tools, *c.def)
		}
	}
}

func toolIndex(tools []llm.Tool, name string) int {
	for i, t := range tools {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// dropCleared removes the system messages marked in cleared (by index in
// msgs) that a user message follows.
func dropCleared(msgs []llm.Message, cleared map[int]bool) []llm.Message {
	lastUser := -1
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			lastUser = i
		}
	}
	out := msgs[:0]
	for i, m := range msgs {
		if cleared[i] && i < lastUser {
			continue
		}
		out = append(out, m)
	}
	return out
}
