package chat

import "github.com/svcgw/svcgw/llm"

// Reading the usual chat request with llm.JSONScanner.
//
// Decoding a request through json/v2's reflection (surface.Decode) was the
// largest JSON cost left in a non-streaming call (~14k instructions of
// ~158k, bench/RESULTS.md, "A non-streaming call without
// reflection"). scanChat reads the members most
// requests are made of — the model, messages of a role and a string
// content, the token limits, stream and its options, sampling numbers,
// user and cache key — and skips the members chatRequest does not have,
// filling the request exactly as surface.Decode would. A request with any
// other member of chatRequest (tools, response_format, stop, a message's
// tool calls or content parts, …), or anything the scanner does not decide
// the same way (see llm.JSONScanner), is decoded by surface.Decode, whose
// answer, error included, is the one that counts; FuzzScanChat checks the
// two agree.

// chatKeys are chatRequest's members: a key equal to one of them but for
// case is one surface.Decode matches (it folds case as encoding/json).
var chatKeys = []string{"model", "messages", "stream", "stream_options", "tools", "tool_choice",
	"parallel_tool_calls", "response_format", "temperature", "top_p", "max_tokens", "max_completion_tokens",
	"n", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
	"user", "prompt_cache_key", "reasoning_effort", "reasoning", "cache_control"}

// messageKeys are chatMessage's members.
var messageKeys = []string{"role", "content", "name", "tool_calls", "tool_call_id", "cache_control"}

// streamOptionsKeys are stream_options' members.
var streamOptionsKeys = []string{"include_usage"}

// roles are the message roles a request repeats.
var roles = []string{"user", "assistant", "system", "tool", "developer"}

// scanChat fills cr, which is zero, from body as surface.Decode would with
// encoding/json's rules, and reports whether it could; on false cr holds
// partial results and the caller decodes body into a zero chatRequest.
func scanChat(sc *llm.JSONScanner, body []byte, cr *chatRequest) bool {
	sc.Reset(body)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "model":
			sc.Once(&seen, 1<<0)
			cr.Model = sc.OptString()
		case "messages":
			sc.Once(&seen, 1<<1)
			if !sc.Null() {
				scanMessages(sc, cr)
			}
		case "stream":
			sc.Once(&seen, 1<<2)
			if !sc.Null() {
				cr.Stream = sc.Bool()
			}
		case "stream_options":
			sc.Once(&seen, 1<<3)
			if !sc.Null() {
				cr.StreamOptions = new(struct {
					IncludeUsage bool `json:"include_usage"`
				})
				scanStreamOptions(sc, &cr.StreamOptions.IncludeUsage)
			}
		case "max_tokens":
			sc.Once(&seen, 1<<4)
			cr.MaxTokens = optInt(sc)
		case "max_completion_tokens":
			sc.Once(&seen, 1<<5)
			cr.MaxCompletionTokens = optInt(sc)
		case "n":
			sc.Once(&seen, 1<<6)
			cr.N = optInt(sc)
		case "top_logprobs":
			sc.Once(&seen, 1<<7)
			cr.TopLogprobs = optInt(sc)
		case "temperature":
			sc.Once(&seen, 1<<8)
			cr.Temperature = optFloat(sc)
		case "top_p":
			sc.Once(&seen, 1<<9)
			cr.TopP = optFloat(sc)
		case "presence_penalty":
			sc.Once(&seen, 1<<10)
			cr.PresencePenalty = optFloat(sc)
		case "frequency_penalty":
			sc.Once(&seen, 1<<11)
			cr.FrequencyPenalty = optFloat(sc)
		case "seed":
			sc.Once(&seen, 1<<12)
			if !sc.Null() {
				n := int64(sc.Int())
				cr.Seed = &n
			}
		case "logprobs":
			sc.Once(&seen, 1<<13)
			if !sc.Null() {
				cr.Logprobs = sc.Bool()
			}
		case "parallel_tool_calls":
			sc.Once(&seen, 1<<14)
			if !sc.Null() {
				b := sc.Bool()
				cr.ParallelToolCalls = &b
			}
		case "user":
			sc.Once(&seen, 1<<15)
			optString(sc, &cr.User)
		case "prompt_cache_key":
			sc.Once(&seen, 1<<16)
			optString(sc, &cr.PromptCacheKey)
		case "reasoning_effort":
			sc.Once(&seen, 1<<17)
			optString(sc, &cr.ReasoningEffort)
		case "tools", "tool_choice", "response_format", "stop", "logit_bias", "reasoning", "cache_control":
			sc.Fail() // read by surface.Decode
		default:
			sc.Unknown(key, chatKeys...)
		}
	}
	return sc.Done()
}

func scanMessages(sc *llm.JSONScanner, cr *chatRequest) {
	if !sc.Open('[') {
		return
	}
	cr.Messages = []chatMessage{} // [] is an empty list, not nil
	for first := true; sc.More(']', first); first = false {
		if sc.Peek() != '{' {
			sc.Fail() // null, or not a message: left to surface.Decode
			return
		}
		cr.Messages = append(cr.Messages, chatMessage{})
		m := &cr.Messages[len(cr.Messages)-1]
		sc.Open('{')
		var seen uint32
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "role":
				sc.Once(&seen, 1<<0)
				if !sc.Null() {
					role := sc.Word(roles) // without allocating the usual ones
					m.Role = &role
				}
			case "content":
				sc.Once(&seen, 1<<1)
				switch sc.Peek() {
				case 'n':
					sc.Null() // null, as absent: not set
				case '"':
					m.Content = content{parts: []contentPart{{Type: "text", Text: sc.String()}}, set: true}
				default:
					sc.Fail() // content parts: read by surface.Decode
				}
			case "name":
				sc.Once(&seen, 1<<2)
				optString(sc, &m.Name)
			case "tool_call_id":
				sc.Once(&seen, 1<<3)
				optString(sc, &m.ToolCallID)
			case "tool_calls", "cache_control":
				sc.Fail()
			default:
				sc.Unknown(key, messageKeys...)
			}
		}
	}
}

func scanStreamOptions(sc *llm.JSONScanner, includeUsage *bool) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "include_usage":
			sc.Once(&seen, 1)
			if !sc.Null() {
				*includeUsage = sc.Bool()
			}
		default:
			sc.Unknown(key, streamOptionsKeys...)
		}
	}
}

// optString reads a string member; null leaves it as it is.
func optString(sc *llm.JSONScanner, s *string) {
	if !sc.Null() {
		*s = sc.String()
	}
}

// optInt reads an integer member of a *int field: null is nil.
func optInt(sc *llm.JSONScanner) *int {
	if sc.Null() {
		return nil
	}
	n := sc.Int()
	return &n
}

// optFloat reads a number member of a *float64 field: null is nil.
func optFloat(sc *llm.JSONScanner) *float64 {
	if sc.Null() {
		return nil
	}
	f := sc.Float()
	return &f
}
