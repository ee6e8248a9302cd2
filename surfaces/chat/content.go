package chat

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// cacheControl is a prompt-cache breakpoint as clients send it
// ({"type":"ephemeral","ttl":"1h"}).
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

func (c *cacheControl) canonical() *llm.CacheControl {
	if c == nil {
		return nil
	}
	ttl := c.TTL
	if ttl == "" {
		ttl = "5m"
	}
	return &llm.CacheControl{TTL: ttl}
}

// contentPart is one element of a chat message's content array.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		Filename string `json:"filename"`
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
	} `json:"file"`
	CacheControl *cacheControl `json:"cache_control"`
}

// content is the `string | []part | null` union of a message's content.
type content struct {
	parts []contentPart
	set   bool // a string or array was present (not null/absent)
}

// UnmarshalJSONFrom decodes the form it finds in one pass (see
// surface.Decode).
func (c *content) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		var s string
		if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		c.parts, c.set = []contentPart{{Type: "text", Text: s}}, true
		return nil
	case '[':
		c.set = true
		return jsonv2.UnmarshalDecode(dec, &c.parts)
	}
	return surface.WrongKind(dec, "a string or an array of content parts")
}

// elem names the i-th element of the field name, as in "messages[2]", for
// an error: a cold path, kept out of line as llm.Errorf is.
//
//go:noinline
func elem(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// canonicalParts converts content parts; field names the content for errors
// (e.g. "messages[2].content"), built only for one.
func canonicalParts(field func() string, parts []contentPart, textOnly bool) ([]llm.Part, error) {
	out := make([]llm.Part, 0, len(parts))
	for i, p := range parts {
		pf := func() string { return elem(field(), i) }
		var part llm.Part
		switch p.Type {
		case "text", "input_text", "output_text":
			part = llm.TextPart(p.Text)
		case "refusal":
			// An assistant turn replayed with its refusal part (openai-go's
			// assistant content union has one): the refusal was its text.
			part = llm.TextPart(p.Refusal)
		case "image_url":
			if textOnly {
				return nil, llm.InvalidParam(pf(), "%s: only text content is allowed here", pf())
			}
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, llm.InvalidParam(pf()+".image_url.url", "%s.image_url.url is required", pf())
			}
			img, err := imagePart(pf()+".image_url.url", p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			part = img
		case "file":
			if textOnly {
				return nil, llm.InvalidParam(pf(), "%s: only text content is allowed here", pf())
			}
			if p.File == nil {
				return nil, llm.InvalidParam(pf()+".file", "%s.file is required", pf())
			}
			doc, err := filePart(pf()+".file", p.File.Filename, p.File.FileData, p.File.FileID)
			if err != nil {
				return nil, err
			}
			part = doc
		case "input_audio":
			return nil, llm.InvalidParam(pf(), "%s: audio input is not supported", pf())
		case "":
			return nil, llm.InvalidParam(pf()+".type", "%s.type is required", pf())
		default:
			return nil, llm.InvalidParam(pf()+".type", "%s.type %q is not supported (use text, image_url or file)", pf(), p.Type)
		}
		part.CacheControl = p.CacheControl.canonical()
		out = append(out, part)
	}
	return out, nil
}

// imagePart accepts a data URL (decoded inline) or an http(s) URL.
func imagePart(field, u string) (llm.Part, error) {
	if strings.HasPrefix(u, "data:") {
		mt, data, err := parseDataURL(field, u)
		if err != nil {
			return llm.Part{}, err
		}
		if !strings.HasPrefix(mt, "image/") {
			return llm.Part{}, llm.InvalidParam(field, "%s: expected an image data URL, got media type %q", field, mt)
		}
		return llm.Part{Type: llm.PartImage, MediaType: mt, Data: data}, nil
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return llm.Part{Type: llm.PartImage, URL: u}, nil
	}
	return llm.Part{}, llm.InvalidParam(field, "%s must be an http(s) URL or a base64 data URL", field)
}

// filePart accepts an inline PDF (file_data as a data URL). Provider file
// ids are not portable across backends.
func filePart(field, filename, fileData, fileID string) (llm.Part, error) {
	if fileID != "" {
		return llm.Part{}, llm.InvalidParam(field+".file_id", "%s.file_id: uploaded file ids are not supported; send the file inline as file_data", field)
	}
	if fileData == "" {
		return llm.Part{}, llm.InvalidParam(field+".file_data", "%s.file_data is required", field)
	}
	mt, data, err := parseDataURL(field+".file_data", fileData)
	if err != nil {
		return llm.Part{}, err
	}
	if mt != "application/pdf" {
		return llm.Part{}, llm.InvalidParam(field+".file_data", "%s.file_data: only application/pdf files are supported, got %q", field, mt)
	}
	return llm.Part{Type: llm.PartDocument, MediaType: mt, Data: data, Title: filename}, nil
}

// parseDataURL splits data:<media type>;base64,<data> and decodes the data.
func parseDataURL(field, u string) (string, []byte, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return "", nil, llm.InvalidParam(field, "%s: expected a data URL of the form data:<media type>;base64,<data>", field)
	}
	mt := strings.ToLower(strings.TrimSuffix(meta, ";base64"))
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		if data, err = base64.RawStdEncoding.DecodeString(payload); err != nil {
			return "", nil, llm.InvalidParam(field, "%s: the data is not valid base64", field)
		}
	}
	return mt, data, nil
}

// toolArguments checks that a tool call's arguments string is a JSON object
// (an empty string counts as {}).
func toolArguments(field func() string, args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		return nil, llm.InvalidParam(field(), "%s must be a JSON object encoded as a string", field())
	}
	return json.RawMessage(args), nil
}
