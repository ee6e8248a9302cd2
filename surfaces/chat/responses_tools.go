package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/svcgw/svcgw/llm"
)

// Responses API tools.
//
// Function tools are served as they are. Two more kinds are served by
// turning them into function tools for the backend and their calls back
// into what the caller declared:
//
//   - a namespace ({"type":"namespace","name":…,"tools":[function tools]},
//     Codex's multi-agent tools) is flattened: each member becomes the
//     function <namespace>__<name>, and its calls come back as function_call
//     items carrying the member's own name and the namespace;
//   - a custom (freeform) tool ({"type":"custom","name":…,"format":…},
//     Codex's apply_patch) becomes a function taking {"input": string}, its
//     grammar or format given to the model in the description; its calls
//     come back as custom_tool_call items whose input is that string.
//
// Hosted tools run inside the vendor's platform (web_search,
// file_search, code_interpreter, computer_use, image_generation, mcp,
// local_shell, shell, apply_patch, tool_search). No backend svcgw routes to
// runs them, so they are dropped from what reaches the backend rather than
// refused: a client that offers them by default (Codex offers web_search and
// tool_search) still works, and the model answers without them. Replayed
// items of those tools (web_search_call, …) are dropped likewise, and a
// tool_choice naming one of them means auto.

// hostedTools are the hosted tool types, matched by prefix so that dated
// variants (web_search_preview_2025_03_11) match too.
var hostedTools = []string{
	"web_search", "file_search", "code_interpreter", "computer", "image_generation",
	"mcp", "local_shell", "shell", "apply_patch", "tool_search",
}

// hostedItems are the input item types of hosted tools' calls and outputs.
var hostedItems = map[string]bool{
	"web_search_call": true, "file_search_call": true, "code_interpreter_call": true,
	"computer_call": true, "computer_call_output": true, "image_generation_call": true,
	"mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true,
	"local_shell_call": true, "local_shell_call_output": true, "shell_call": true, "shell_call_output": true,
	"apply_patch_call": true, "apply_patch_call_output": true, "tool_search_call": true, "tool_search_output": true,
}

func isHosted(typ string) bool {
	for _, h := range hostedTools {
		if strings.HasPrefix(typ, h) {
			return true
		}
	}
	return false
}

// namespaceSep joins a namespace and a member's name into the function name
// the backend sees.
const namespaceSep = "__"

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
	// Tools are a namespace's members.
	Tools []responsesTool `json:"tools"`
	// Format is a custom tool's input format: {"type":"text"} or
	// {"type":"grammar","syntax":"lark"|"regex","definition":…}.
	Format *struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
}

// decodeTools decodes the tools of a Responses request.
func decodeTools(tools []responsesTool) ([]llm.Tool, error) {
	var out []llm.Tool
	seen := map[string]bool{}
	add := func(f string, t llm.Tool) error {
		if seen[t.Name] {
			return llm.InvalidParam(f+".name", "%s.name: the tool name %q is used twice", f, t.Name)
		}
		seen[t.Name] = true
		out = append(out, t)
		return nil
	}
	for i, t := range tools {
		f := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type == "function", t.Type == "custom":
			ft, err := decodeTool(f, t, "")
			if err != nil {
				return nil, err
			}
			if err := add(f, ft); err != nil {
				return nil, err
			}
		case t.Type == "namespace":
			if t.Name == "" {
				return nil, llm.InvalidParam(f+".name", "%s.name is required", f)
			}
			for j, m := range t.Tools {
				mf := fmt.Sprintf("%s.tools[%d]", f, j)
				if m.Type != "function" && m.Type != "custom" {
					return nil, llm.InvalidParam(mf+".type", "%s.type %q is not supported in a namespace: only function and custom tools are", mf, m.Type)
				}
				ft, err := decodeTool(mf, m, t.Name)
				if err != nil {
					return nil, err
				}
				if t.Description != "" {
					ft.Description = strings.TrimSpace(t.Description + "\n\n" + ft.Description)
				}
				if err := add(mf, ft); err != nil {
					return nil, err
				}
			}
		case isHosted(t.Type):
			// Dropped (see above).
		default:
			return nil, llm.InvalidParam(f+".type", "%s.type %q is not supported: function, custom and namespace tools are; hosted tools are ignored", f, t.Type)
		}
	}
	return out, nil
}

// decodeTool decodes a function or custom tool, in namespace ns when it is
// a namespace's member.
func decodeTool(f string, t responsesTool, ns string) (llm.Tool, error) {
	if t.Name == "" {
		return llm.Tool{}, llm.InvalidParam(f+".name", "%s.name is required", f)
	}
	out := llm.Tool{Name: t.Name, Description: t.Description, Strict: t.Strict, Namespace: ns}
	if ns != "" {
		out.Name = ns + namespaceSep + t.Name
	}
	if t.Type == "custom" {
		out.Freeform = true
		out.Parameters = freeformParameters(t)
		return out, nil
	}
	if err := schemaObject(f+".parameters", t.Parameters); err != nil {
		return llm.Tool{}, err
	}
	out.Parameters = nullToNil(t.Parameters)
	return out, nil
}

// freeformParameters is the one-string-object schema a custom tool's input
// travels in, describing the input's format to the model.
func freeformParameters(t responsesTool) json.RawMessage {
	desc := "The tool's input, as raw text."
	if f := t.Format; f != nil && f.Type == "grammar" && f.Definition != "" {
		desc = fmt.Sprintf("The tool's input, as raw text matching this %s grammar:\n%s", f.Syntax, f.Definition)
	}
	b, _ := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"input": map[string]string{"type": "string", "description": desc}},
		"required":             []string{"input"},
		"additionalProperties": false,
	})
	return b
}

// freeformArguments wraps a custom tool call's input as the arguments
// object its function takes.
func freeformArguments(input string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Input string `json:"input"`
	}{input})
	return b
}

// freeformInput unwraps a custom tool call's input from its arguments; a
// backend that sent something else gets its raw arguments passed on.
func freeformInput(args []byte) string {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal(args, &v) == nil && v.Input != nil {
		return *v.Input
	}
	return string(args)
}

// toolShapes maps the backend names of a request's tools to how the caller
// declared them, for the tools that are not plain functions.
type toolShapes map[string]llm.Tool

func shapesOf(req *llm.Request) toolShapes {
	var m toolShapes
	if req == nil {
		return m
	}
	for _, t := range req.Tools {
		if t.Namespace != "" || t.Freeform {
			if m == nil {
				m = toolShapes{}
			}
			m[t.Name] = t
		}
	}
	return m
}

// call returns the item type, name and namespace a call of backend tool
// name comes back as.
func (m toolShapes) call(name string) (typ, bare, ns string) {
	t, ok := m[name]
	if !ok {
		return "function_call", name, ""
	}
	typ = "function_call"
	if t.Freeform {
		typ = "custom_tool_call"
	}
	if t.Namespace != "" {
		return typ, strings.TrimPrefix(name, t.Namespace+namespaceSep), t.Namespace
	}
	return typ, name, ""
}

// decodeResponsesToolChoice decodes tool_choice: a custom tool is named like
// a function, and a hosted tool (dropped) leaves the choice to the model.
func decodeResponsesToolChoice(raw json.RawMessage) (llm.ToolChoice, error) {
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		switch {
		case obj.Type == "custom" && obj.Name != "":
			return llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: obj.Name}, nil
		case isHosted(obj.Type):
			return llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
		}
	}
	return decodeToolChoice(raw, true)
}
