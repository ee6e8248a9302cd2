package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svcgw/svcgw/llm"
)

// Fixture is a deterministic backend for tests, demos and load tests: it
// never calls a model, and the same request always gets the same reply, byte
// for byte. It is what svcgw serves when no upstream is configured.
//
// # Replies
//
// The fixture picks exactly one kind of reply, checking in this order:
//
//  1. Tool call. When tools are offered, tool choice is not "none" and the
//     last message does not hold a tool result, the reply is one tool call
//     and the finish reason is tool_calls. The tool is the one named by a
//     "tool" choice (an invalid_request error if it is not offered);
//     otherwise the first offered tool that the last user text names (as a
//     word: "run ls with exec_command" calls exec_command; its last text
//     part that names one counts), else the first
//     offered tool, or the first one in the allowed list when the choice
//     restricts it. "auto" calls a tool too. The call's id is
//     "call_" plus 24 hex digits of a hash of the request. Its arguments are
//     a JSON object generated from the tool's parameters schema that
//     validates against it: all required properties, the optional ones of
//     the top levels, "example" for plain strings, 1 for integers, 1.5 for
//     numbers, true for booleans, the first member of an enum, const values,
//     fixed examples for the formats date, date-time, time, email, uri,
//     uuid, hostname, ipv4 and ipv6, honouring minimum/maximum (and their
//     exclusive forms), multipleOf, minLength/maxLength, minItems/maxItems,
//     minProperties, anyOf/oneOf (the first non-null branch), allOf and
//     local $ref (#/$defs/…, #/definitions/…). pattern is not honoured. A
//     tool without a schema gets {}.
//  2. JSON. When a response format is requested, the text is a JSON value
//     valid against its schema, made the same way; without a schema it is
//     {"reply":"<the text rule 3 or 4 would give>"}. Finish reason stop.
//  3. Tool result. When the last message holds tool results, the text has
//     one sentence per result, then the closing sentence. Finish reason stop.
//  4. Echo. Otherwise the text is the echo. Finish reason stop.
//
// The texts, where QUOTE is the text of the last user message (its text
// parts joined by spaces), RESULT the text of a tool result, and NAME the
// tool's name (from the result, else from the call with the same id in the
// history, else "the tool"); QUOTE and RESULT have runs of white space
// collapsed to one space and are cut to their first 200 characters:
//
//	echo:         Fixture reply to: "QUOTE". This reply is deterministic: the same request always gets the same answer.
//	tool result:  Fixture received the result of NAME: "RESULT".
//	tool error:   Fixture received an error from NAME: "RESULT".
//	closing:      This reply is deterministic: the same request always gets the same answer.
//	reasoning:    Thinking about: "QUOTE". Steps: read the request, choose the reply, write it.
//
// When reasoning is requested and not switched off (Request.Reasoning set
// and Enabled), a reasoning part comes first, quoting the user text, or the
// tool results' texts joined by spaces. It carries the signature "fxsig_"
// plus 32 hex digits of a hash of the request and the reasoning text.
// Reasoning tokens are counted in the output tokens. Request.N is ignored:
// there is one reply.
//
// # Limits
//
// Stop sequences: when one of the requested stop strings occurs in the text
// (not in reasoning or tool arguments), the text ends just before the
// earliest occurrence and the finish reason is stop_sequence, with the
// matched string reported.
//
// Max tokens: reasoning and text together never exceed MaxTokens output
// tokens. Reasoning is spent first; the text is cut to the longest prefix
// llm.TextTokens counts within the remaining budget, and the finish reason is
// length. A JSON reply cut this way is not valid JSON, as with real models. A
// tool call is never cut: it is dropped (finish length) only when reasoning
// used up the whole budget.
//
// # Usage
//
// Input tokens are llm.Request.InputTokens. Output tokens are llm.TextTokens
// of the reasoning plus the text, or llm.PartTokens of the tool call.
//
// # Prompt caching
//
// Cache breakpoints are the CacheControl marks on tools, system parts and
// message parts, and on the request itself (which marks the end of the
// prompt). The prompt is a sequence of blocks (each tool, each system part,
// each message part, in that order); the prefix up to and including the last
// breakpoint is the cacheable prefix. A call whose cacheable prefix is
// shorter than FixtureOptions.MinCacheTokens caches nothing. Otherwise the
// fixture looks for the longest prefix it has cached before that ends at a
// breakpoint or at one of the 20 blocks before a breakpoint, and reports it
// as CachedInputTokens; the rest of the cacheable prefix is reported as
// CacheCreationTokens, and the part of that before (and including) the last
// one-hour ("1h") breakpoint also as CacheCreation1hTokens. Every breakpoint
// prefix of at least MinCacheTokens is then remembered. So a first call
// writes the whole prefix, the same call again reads it all, and the next
// turn of a conversation reads the previous turn's prefix and writes the
// rest. Prefixes are keyed by a hash of their content and the request's
// Account (not of the breakpoints, nor the model id): one account's prefix
// is never another's cache read. They are shared by every request type the
// fixture serves, never expire, and the 10,000 least recently used are
// kept. Usage therefore depends on what the same Fixture has seen before
// for the same account; content never does.
//
// # Streams
//
// Stream yields the same reply as Complete: reasoning deltas (the last one
// carrying the signature), then text deltas of about a word each (a reply of
// three or more characters always takes at least three events), or one tool
// call start followed by at least two argument fragments; then a finish
// event with the finish reason, stop sequence and usage. Concatenated
// deltas equal Complete's text and arguments exactly.
//
// # Latency
//
// With FixtureOptions.TimeToFirstToken the first event (or Complete's
// return) waits that long; with TokensPerSecond each later event waits for
// its share of the output at that speed (Complete waits for all of it). Stream
// returns at once; the waits happen in Next. Cancelling the context ends a
// wait at once: Complete returns ctx.Err(), Next returns false and Err
// reports ctx.Err(). No content depends on time.
//
// The fixture never rejects a request for its size.
type Fixture struct {
	opts         FixtureOptions
	cache        *promptCache
	turnOverhead int // llm's estimate of one turn's framing tokens
}

// FixtureOptions configures a Fixture. The zero value is an instant fixture
// with the default limits.
type FixtureOptions struct {
	// TimeToFirstToken is the simulated latency before the first event
	// (0 = none).
	TimeToFirstToken time.Duration
	// TokensPerSecond is the simulated output speed (0 = instant).
	TokensPerSecond float64
	// Limits are the limits the fixture reports; zero fields default to a
	// ContextLength of 200000 and MaxCompletionTokens of 32000.
	Limits Limits
	// MinCacheTokens is the smallest prefix that is cached: 0 means the
	// default of 1024 tokens (the vendors' usual minimum); a negative value
	// caches prefixes of any size.
	MinCacheTokens int
}

// Default fixture limits.
const (
	defaultFixtureContext    = 200000
	defaultFixtureCompletion = 32000
	// quoteRunes is how much of a user text or tool result a reply quotes.
	quoteRunes = 200
)

// Fixed reply texts (see the Fixture documentation).
const (
	replyClosing   = " This reply is deterministic: the same request always gets the same answer."
	reasoningSteps = " Steps: read the request, choose the reply, write it."
)

var _ Backend = (*Fixture)(nil)

// NewFixture returns a fixture backend.
func NewFixture(opts FixtureOptions) *Fixture {
	if opts.Limits.ContextLength <= 0 {
		opts.Limits.ContextLength = defaultFixtureContext
	}
	if opts.Limits.MaxCompletionTokens <= 0 {
		opts.Limits.MaxCompletionTokens = defaultFixtureCompletion
	}
	switch {
	case opts.MinCacheTokens == 0:
		opts.MinCacheTokens = defaultMinCacheTokens
	case opts.MinCacheTokens < 0:
		opts.MinCacheTokens = 0
	}
	if opts.TokensPerSecond < 0 || math.IsNaN(opts.TokensPerSecond) {
		opts.TokensPerSecond = 0
	}
	return &Fixture{
		opts:         opts,
		cache:        newPromptCache(),
		turnOverhead: (&llm.Request{Messages: make([]llm.Message, 1)}).InputTokens(),
	}
}

// Limits returns the limits the fixture reports.
func (f *Fixture) Limits() Limits { return f.opts.Limits }

// Complete returns the fixture's reply to req.
func (f *Fixture) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := f.plan(req)
	if err != nil {
		return nil, err
	}
	wait := f.opts.TimeToFirstToken + f.tokenDelay(r.usage.OutputTokens)
	if err := sleep(ctx, wait, nil); err != nil {
		return nil, err
	}
	resp := &llm.Response{FinishReason: r.finish, StopSequence: r.stopSequence, Usage: r.usage}
	if r.reasoning != "" {
		resp.Content = append(resp.Content, llm.Part{Type: llm.PartReasoning, Text: r.reasoning, Signature: r.signature})
	}
	if r.text != "" {
		resp.Content = append(resp.Content, llm.TextPart(r.text))
	}
	if r.call != nil {
		c := *r.call
		resp.Content = append(resp.Content, llm.Part{Type: llm.PartToolCall, ToolCall: &c})
	}
	return resp, nil
}

// Stream returns the fixture's reply to req as a stream of events.
func (f *Fixture) Stream(ctx context.Context, req *llm.Request) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := f.plan(req)
	if err != nil {
		return nil, err
	}
	s := &fixtureStream{ctx: ctx}
	// The first event waits for the time to first token; each later one
	// waits for its own tokens at the configured speed.
	push := func(ev llm.Event, text string) {
		d := f.tokenDelay(llm.TextTokens(text))
		if len(s.events) == 0 {
			d = f.opts.TimeToFirstToken
		}
		s.events = append(s.events, ev)
		s.delays = append(s.delays, d)
	}
	if r.reasoning != "" {
		chunks := splitText(r.reasoning)
		for i, c := range chunks {
			ev := llm.Event{Type: llm.EventReasoningDelta, Text: c}
			if i == len(chunks)-1 {
				ev.Signature = r.signature
			}
			push(ev, c)
		}
	}
	for _, c := range splitText(r.text) {
		push(llm.Event{Type: llm.EventTextDelta, Text: c}, c)
	}
	if r.call != nil {
		start := &llm.ToolCall{ID: r.call.ID, Name: r.call.Name}
		push(llm.Event{Type: llm.EventToolCallStart, ToolCall: start}, r.call.Name)
		for _, frag := range splitArguments(string(r.call.Arguments)) {
			push(llm.Event{Type: llm.EventToolCallDelta, Text: frag}, frag)
		}
	}
	u := r.usage
	push(llm.Event{Type: llm.EventFinish, FinishReason: r.finish, StopSequence: r.stopSequence, Usage: &u}, "")
	if s.events[0].Usage == nil {
		// The prompt side is known before the reply, as at a vendor whose
		// stream opens with it.
		s.events[0].Usage = inputUsage(u)
	}
	return s, nil
}

// tokenDelay is how long n output tokens take at the configured speed.
func (f *Fixture) tokenDelay(n int) time.Duration {
	if f.opts.TokensPerSecond <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / f.opts.TokensPerSecond * float64(time.Second))
}

// reply is the planned answer to one request.
type reply struct {
	reasoning, signature string
	text                 string
	call                 *llm.ToolCall
	finish               llm.FinishReason
	stopSequence         string
	usage                llm.Usage
}

// plan works out the whole reply to req and records its cacheable prefixes.
func (f *Fixture) plan(req *llm.Request) (*reply, error) {
	if req == nil {
		return nil, llm.Errorf(llm.KindInvalidRequest, "empty request")
	}
	blocks := promptBlocks(req, f.turnOverhead)
	fp := fingerprint(req, blocks)
	r := &reply{finish: llm.FinishStop}

	results := lastToolResults(req)
	subject := collapse(lastUserText(req))
	var base string // the reply of rules 3 and 4
	if len(results) > 0 {
		base, subject = toolResultText(req, results)
	} else {
		base = `Fixture reply to: "` + subject + `".` + replyClosing
	}

	switch {
	case len(req.Tools) > 0 && req.ToolChoice.Mode != llm.ToolChoiceNone && len(results) == 0:
		t, err := chooseTool(req)
		if err != nil {
			return nil, err
		}
		r.call = &llm.ToolCall{
			ID:        "call_" + hex.EncodeToString(fp[:12]),
			Name:      t.Name,
			Arguments: toolArguments(t.Parameters),
		}
		r.finish = llm.FinishToolCalls
	case req.ResponseFormat != nil:
		r.text = string(jsonReply(req.ResponseFormat.Schema, base))
	default:
		r.text = base
	}

	if req.Reasoning != nil && req.Reasoning.Enabled {
		r.reasoning = `Thinking about: "` + subject + `".` + reasoningSteps
	}

	// Stop sequences end the text at the earliest match.
	if r.call == nil {
		cut := -1
		for _, s := range req.Stop {
			if i := strings.Index(r.text, s); s != "" && i >= 0 && (cut < 0 || i < cut) {
				cut, r.stopSequence = i, s
			}
		}
		if cut >= 0 {
			r.text, r.finish = r.text[:cut], llm.FinishStopSequence
		}
	}

	// Max tokens: reasoning first, then the text.
	if budget := req.MaxTokens; budget > 0 {
		if llm.TextTokens(r.reasoning) >= budget {
			r.reasoning = truncateTokens(r.reasoning, budget)
			r.text, r.call, r.stopSequence, r.finish = "", nil, "", llm.FinishLength
		}
		left := budget - llm.TextTokens(r.reasoning)
		if llm.TextTokens(r.text) > left {
			r.text = truncateTokens(r.text, left)
			r.stopSequence, r.finish = "", llm.FinishLength
		}
	}

	if r.reasoning != "" {
		sig := sha256.Sum256(append(fp[:], r.reasoning...))
		r.signature = "fxsig_" + hex.EncodeToString(sig[:16])
	}

	r.usage.InputTokens = req.InputTokens()
	r.usage.ReasoningTokens = llm.TextTokens(r.reasoning)
	r.usage.OutputTokens = r.usage.ReasoningTokens + llm.TextTokens(r.text)
	if r.call != nil {
		r.usage.OutputTokens += llm.PartTokens(llm.Part{Type: llm.PartToolCall, ToolCall: r.call})
	}
	cu := f.cache.account(blocks, f.opts.MinCacheTokens)
	r.usage.CachedInputTokens = cu.read
	r.usage.CacheCreationTokens = cu.write
	r.usage.CacheCreation1hTokens = cu.write1h
	return r, nil
}

// chooseTool picks the tool to call (rule 1).
func chooseTool(req *llm.Request) (*llm.Tool, error) {
	tc := req.ToolChoice
	if tc.Mode == llm.ToolChoiceTool {
		for i := range req.Tools {
			if req.Tools[i].Name == tc.Name {
				return &req.Tools[i], nil
			}
		}
		return nil, llm.InvalidParam("tool_choice", "tool_choice names the tool %q, which is not among the tools offered", tc.Name)
	}
	if len(tc.Allowed) == 0 {
		// The last text part first: coding agents put their reminders
		// (which name every tool) before the prompt.
		texts := lastUserTexts(req)
		for j := len(texts) - 1; j >= 0; j-- {
			for i := range req.Tools {
				if mentions(texts[j], req.Tools[i].Name) {
					return &req.Tools[i], nil
				}
			}
		}
		return &req.Tools[0], nil
	}
	for _, name := range tc.Allowed {
		for i := range req.Tools {
			if req.Tools[i].Name == name {
				return &req.Tools[i], nil
			}
		}
	}
	return nil, llm.InvalidParam("tool_choice", "none of the allowed tools is among the tools offered")
}

// mentions reports whether text holds name as a word: not inside a longer
// identifier.
func mentions(text, name string) bool {
	ident := func(r rune) bool { return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	for i := 0; name != ""; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		before, _ := utf8.DecodeLastRuneInString(text[:start])
		after, _ := utf8.DecodeRuneInString(text[end:])
		if (start == 0 || !ident(before)) && (end == len(text) || !ident(after)) {
			return true
		}
		i = start + 1
	}
	return false
}

// lastUserText is the text of the last user message that has any, its text
// parts joined by spaces; tool results are not user text.
func lastUserText(req *llm.Request) string {
	return strings.Join(lastUserTexts(req), " ")
}

// lastUserTexts are the text parts of the last user message that has any.
func lastUserTexts(req *llm.Request) []string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != llm.RoleUser {
			continue
		}
		var texts []string
		for _, p := range m.Parts {
			if p.Type == llm.PartText {
				texts = append(texts, p.Text)
			}
		}
		if len(texts) > 0 {
			return texts
		}
	}
	return nil
}

// lastToolResults returns the tool results of the last message, if any.
// System guidance after it (llm.RoleSystem) is not a message of the
// conversation's turns, so it does not hide them.
func lastToolResults(req *llm.Request) []*llm.ToolResult {
	msgs := req.Messages
	for len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleSystem {
		msgs = msgs[:len(msgs)-1]
	}
	if len(msgs) == 0 {
		return nil
	}
	var out []*llm.ToolResult
	for _, p := range msgs[len(msgs)-1].Parts {
		if p.Type == llm.PartToolResult && p.ToolResult != nil {
			out = append(out, p.ToolResult)
		}
	}
	return out
}

// toolResultText is the reply of rule 3, and the subject reasoning quotes.
func toolResultText(req *llm.Request, results []*llm.ToolResult) (text, subject string) {
	var b, subj strings.Builder
	for i, res := range results {
		var parts []string
		for _, p := range res.Content {
			if p.Type == llm.PartText {
				parts = append(parts, p.Text)
			}
		}
		quote := collapse(strings.Join(parts, " "))
		name := res.Name
		if name == "" {
			name = callName(req, res.CallID)
		}
		if i > 0 {
			b.WriteByte(' ')
			subj.WriteByte(' ')
		}
		if res.IsError {
			b.WriteString("Fixture received an error from " + name + `: "` + quote + `".`)
		} else {
			b.WriteString("Fixture received the result of " + name + `: "` + quote + `".`)
		}
		subj.WriteString(quote)
	}
	b.WriteString(replyClosing)
	return b.String(), truncateRunes(subj.String(), quoteRunes)
}

// callName finds the name of the tool call with the given id in the history.
func callName(req *llm.Request, id string) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		for _, p := range req.Messages[i].Parts {
			if p.Type == llm.PartToolCall && p.ToolCall != nil && p.ToolCall.ID == id && p.ToolCall.Name != "" {
				return p.ToolCall.Name
			}
		}
	}
	return "the tool"
}

// collapse turns runs of white space into one space, trims the ends and keeps
// the first quoteRunes characters.
func collapse(s string) string {
	return truncateRunes(strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " "), quoteRunes)
}

// truncateRunes keeps the first n characters of s.
func truncateRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// truncateTokens keeps the longest prefix of s that llm.TextTokens counts
// as at most n tokens.
func truncateTokens(s string, n int) string {
	return llm.TruncateTokens(s, max(n, 0))
}

// splitText splits a text into word-sized stream deltas: each delta is a
// word with the white space after it, long words are split every 16
// characters, and a text of three or more characters takes at least three
// deltas.
func splitText(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	start, prevSpace, runes := 0, false, 0
	for i, r := range s {
		space := unicode.IsSpace(r)
		if (prevSpace && !space) || runes == 16 {
			out = append(out, s[start:i])
			start, runes = i, 0
		}
		prevSpace = space
		runes++
	}
	out = append(out, s[start:])
	if len(out) < 3 && utf8.RuneCountInString(s) >= 3 {
		return splitEven(s, 3)
	}
	return out
}

// splitArguments splits tool-call arguments into at least two fragments of
// at most 16 characters each (never inside a UTF-8 sequence).
func splitArguments(s string) []string {
	n := utf8.RuneCountInString(s)
	if n < 2 {
		return []string{s}
	}
	return splitEven(s, max(2, (n+15)/16))
}

// splitEven splits s into k pieces of nearly equal length in characters.
func splitEven(s string, k int) []string {
	n := utf8.RuneCountInString(s)
	k = max(min(k, n), 1)
	out := make([]string, 0, k)
	start, seen, piece := 0, 0, 0
	for i := range s {
		if seen == (piece+1)*n/k && piece < k-1 {
			out = append(out, s[start:i])
			start = i
			piece++
		}
		seen++
	}
	return append(out, s[start:])
}

// fingerprint hashes everything about a request that shapes the reply, so
// ids and signatures derived from it are the same for the same request.
// Stream and IncludeUsage are left out: streaming does not change a reply.
// blocks are the request's prompt blocks; the last one's key already hashes
// the whole prompt.
func fingerprint(req *llm.Request, blocks []block) [sha256.Size]byte {
	var h chainHasher
	if len(blocks) > 0 {
		h.prev = blocks[len(blocks)-1].key
	}
	h.begin('R')
	h.str(req.Model)
	h.str(string(req.ToolChoice.Mode))
	h.str(req.ToolChoice.Name)
	for _, a := range req.ToolChoice.Allowed {
		h.str(a)
	}
	h.flag(req.ResponseFormat != nil)
	if rf := req.ResponseFormat; rf != nil {
		h.str(rf.Name)
		h.bytes(rf.Schema)
	}
	h.flag(req.Reasoning != nil && req.Reasoning.Enabled)
	h.buf = binary.AppendVarint(h.buf, int64(req.MaxTokens))
	for _, s := range req.Stop {
		h.str(s)
	}
	return h.sum()
}

// fixtureStream replays a planned reply, waiting between events as the
// fixture's latency options say.
type fixtureStream struct {
	ctx    context.Context
	events []llm.Event
	delays []time.Duration
	next   int
	cur    llm.Event
	err    error
	timer  *time.Timer
	closed bool
}

func (s *fixtureStream) Next() bool {
	if s.closed || s.err != nil || s.next >= len(s.events) {
		return false
	}
	if err := sleep(s.ctx, s.delays[s.next], &s.timer); err != nil {
		s.err = err
		return false
	}
	s.cur = s.events[s.next]
	s.next++
	return true
}

func (s *fixtureStream) Event() llm.Event { return s.cur }

// Ready reports whether Next returns without a simulated wait.
func (s *fixtureStream) Ready() bool {
	return s.closed || s.err != nil || s.next >= len(s.events) || s.delays[s.next] <= 0
}

func (s *fixtureStream) Err() error { return s.err }

func (s *fixtureStream) Close() error {
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}

// sleep waits for d or until ctx is done, returning ctx.Err() in that case.
// timer, when not nil, holds a timer to reuse across calls.
func sleep(ctx context.Context, d time.Duration, timer **time.Timer) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	var t *time.Timer
	switch {
	case timer == nil:
		t = time.NewTimer(d)
		defer t.Stop()
	case *timer == nil:
		t = time.NewTimer(d)
		*timer = t
	default:
		t = *timer
		t.Reset(d)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
