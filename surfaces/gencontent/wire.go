package gencontent

import "encoding/json"

// Wire types of the generate-content format (docs/wire/generate-content.md#requests
// and #responses). The same structs serve input and output where the shapes agree.
// Field names are lowerCamelCase: the official SDKs never send anything else
// (go-genai, python-genai and js-genai all marshal camelCase), so the
// snake_case proto spellings of hand-written REST calls are not accepted.

// generateContentRequest is the body of :generateContent,
// :streamGenerateContent and the inner request of :countTokens.
type generateContentRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction"`
	Tools             []json.RawMessage `json:"tools"` // see decodeTools: built-in tools are refused by key
	ToolConfig        *toolConfig       `json:"toolConfig"`
	GenerationConfig  *generationConfig `json:"generationConfig"`
	CachedContent     string            `json:"cachedContent"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts,omitempty"`
}

// part holds exactly one data field (text, inlineData, fileData,
// functionCall, functionResponse, executableCode, codeExecutionResult), plus
// the optional thought flag and thoughtSignature.
type part struct {
	Text                string            `json:"text,omitempty"`
	Thought             bool              `json:"thought,omitempty"`
	ThoughtSignature    string            `json:"thoughtSignature,omitempty"` // standard base64 (see signature.go)
	InlineData          *blob             `json:"inlineData,omitempty"`
	FileData            json.RawMessage   `json:"fileData,omitempty"`
	FunctionCall        *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse    *functionResponse `json:"functionResponse,omitempty"`
	ExecutableCode      json.RawMessage   `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage   `json:"codeExecutionResult,omitempty"`
}

type blob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"` // standard base64
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"` // a JSON object, never a string
}

type functionResponse struct {
	ID       string                 `json:"id,omitempty"`
	Name     string                 `json:"name"`
	Response json.RawMessage        `json:"response"` // a JSON object
	Parts    []functionResponsePart `json:"parts,omitempty"`
}

type functionResponsePart struct {
	InlineData *blob           `json:"inlineData,omitempty"`
	FileData   json.RawMessage `json:"fileData,omitempty"`
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`           // OpenAPI-subset Schema
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"` // JSON Schema
}

type toolConfig struct {
	FunctionCallingConfig *functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames"`
}

type generationConfig struct {
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"topP"`
	TopK               *float64        `json:"topK"` // go-genai sends a float32
	CandidateCount     *int            `json:"candidateCount"`
	MaxOutputTokens    *int            `json:"maxOutputTokens"`
	StopSequences      []string        `json:"stopSequences"`
	Seed               *int64          `json:"seed"`
	PresencePenalty    *float64        `json:"presencePenalty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty"`
	ResponseMIMEType   string          `json:"responseMimeType"`
	ResponseSchema     json.RawMessage `json:"responseSchema"`     // OpenAPI-subset Schema
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"` // JSON Schema
	ResponseModalities []string        `json:"responseModalities"`
	ResponseLogprobs   bool            `json:"responseLogprobs"`
	Logprobs           *int            `json:"logprobs"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig"`
}

type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts"`
	ThinkingBudget  *int   `json:"thinkingBudget"`
	ThinkingLevel   string `json:"thinkingLevel"`
}

// generateContentResponse is the body of :generateContent and of each
// :streamGenerateContent event.
type generateContentResponse struct {
	Candidates    []candidate    `json:"candidates"`
	UsageMetadata *usageMetadata `json:"usageMetadata,omitempty"`
	ModelVersion  string         `json:"modelVersion"`
	ResponseID    string         `json:"responseId"`
}

type candidate struct {
	// Content always carries role "model" (the JS chat helper drops turns
	// without it), even when there are no parts.
	Content      content `json:"content"`
	FinishReason string  `json:"finishReason,omitempty"`
	Index        int     `json:"index"`
}

// usageMetadata follows go-genai's field docs: promptTokenCount includes
// the cached tokens, candidatesTokenCount excludes the thoughts, and the
// total is their sum.
type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// present reports whether a raw field was sent with a value other than null.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}
