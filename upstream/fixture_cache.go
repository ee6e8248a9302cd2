package upstream

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"sync"

	"github.com/svcgw/svcgw/llm"
)

// This file simulates vendor prompt caching for the fixture backend, closely
// enough that clients can test their cached-token accounting (see the
// "Prompt caching" section of the Fixture documentation).

const (
	// cacheEntries bounds the fixture's cache; the least recently used
	// prefix is forgotten first.
	cacheEntries = 10000
	// cacheLookback is how many block boundaries before a breakpoint are
	// checked for an earlier cached prefix, as Anthropic does ("about 20").
	cacheLookback = 20
	// defaultMinCacheTokens is the smallest cacheable prefix, like the
	// vendors' minimum.
	defaultMinCacheTokens = 1024
)

// prefixKey identifies a prompt prefix: a hash chained over its blocks.
type prefixKey [sha256.Size]byte

// block is one cacheable unit of a prompt (a tool definition, a system part
// or a message part) with the prompt's running totals at its end.
type block struct {
	key        prefixKey // hash of the prompt up to and including this block
	tokens     int       // estimated tokens of the prompt up to and including this block
	breakpoint bool      // a cache_control breakpoint sits on this block
	oneHour    bool      // ... with a one-hour lifetime
}

// promptCache is the fixture's memory of cached prefixes: a bounded LRU set.
type promptCache struct {
	mu    sync.Mutex
	order *list.List                  // front: most recently used key
	seen  map[prefixKey]*list.Element // key → element holding that key
}

func newPromptCache() *promptCache {
	return &promptCache{order: list.New(), seen: make(map[prefixKey]*list.Element)}
}

// has reports whether key is cached, marking it used. c.mu must be held.
func (c *promptCache) has(k prefixKey) bool {
	e, ok := c.seen[k]
	if ok {
		c.order.MoveToFront(e)
	}
	return ok
}

// put caches key. c.mu must be held.
func (c *promptCache) put(k prefixKey) {
	if c.has(k) {
		return
	}
	c.seen[k] = c.order.PushFront(k)
	for c.order.Len() > cacheEntries {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.seen, last.Value.(prefixKey))
	}
}

// cacheUsage is the cache part of a call's usage.
type cacheUsage struct {
	read, write, write1h int
}

// account looks up and records the cacheable prefixes of one call and
// returns what was read from and written to the cache. Prefixes shorter
// than minTokens are never cached.
func (c *promptCache) account(blocks []block, minTokens int) cacheUsage {
	last, oneHour := -1, 0
	for i, b := range blocks {
		if b.breakpoint {
			last = i
			if b.oneHour {
				oneHour = b.tokens
			}
		}
	}
	if last < 0 || blocks[last].tokens < minTokens {
		return cacheUsage{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()

	// The longest cached prefix ending at a breakpoint or within the
	// lookback window before one. Totals only grow along the prompt, so
	// the scan stops at the first boundary too short to have been cached.
	read, nearest := 0, last
	for i := last; i >= 0 && blocks[i].tokens >= minTokens; i-- {
		if blocks[i].breakpoint {
			nearest = i
		}
		if nearest-i < cacheLookback && c.has(blocks[i].key) {
			read = blocks[i].tokens
			break
		}
	}
	for _, b := range blocks[:last+1] {
		if b.breakpoint && b.tokens >= minTokens {
			c.put(b.key)
		}
	}
	total := blocks[last].tokens
	return cacheUsage{
		read:    read,
		write:   total - read,
		write1h: max(min(oneHour, total)-read, 0),
	}
}

// promptBlocks splits a request's prompt into blocks in the order prompt
// caches see it: tools, system, messages. Token totals use the same
// estimates as llm.Request.InputTokens, so the last block's total is the
// whole prompt except the response schema. Keys ignore the cache_control
// markers themselves, so moving a breakpoint later in a conversation still
// finds the prefix an earlier call cached.
func promptBlocks(req *llm.Request, turnOverhead int) []block {
	n := len(req.Tools) + len(req.System)
	for _, m := range req.Messages {
		n += len(m.Parts)
	}
	blocks := make([]block, 0, n)
	var h chainHasher
	// Every key chains from the account: one account's prefixes are never
	// another's cache hits (real vendors cache per API key or organisation,
	// which here would be everyone).
	h.begin('A')
	h.str(req.Account)
	h.sum()
	tokens := 0
	add := func(bp *llm.CacheControl) {
		b := block{key: h.sum(), tokens: tokens}
		if bp != nil {
			b.breakpoint = true
			b.oneHour = strings.EqualFold(strings.TrimSpace(bp.TTL), "1h")
		}
		blocks = append(blocks, b)
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		h.begin('T')
		h.str(t.Name)
		h.str(t.Description)
		h.bytes(t.Parameters)
		h.flag(t.Strict)
		tokens += llm.ToolTokens(*t)
		add(t.CacheControl)
	}
	for i := range req.System {
		h.begin('S')
		if i == 0 {
			tokens += turnOverhead
		}
		h.part(&req.System[i])
		tokens += llm.PartTokens(req.System[i])
		add(req.System[i].CacheControl)
	}
	for _, m := range req.Messages {
		tokens += turnOverhead
		for i := range m.Parts {
			if i == 0 {
				h.begin('M') // a new turn
				h.str(string(m.Role))
			} else {
				h.begin('P')
			}
			h.part(&m.Parts[i])
			tokens += llm.PartTokens(m.Parts[i])
			add(m.Parts[i].CacheControl)
		}
	}
	// A request-level breakpoint (automatic caching) covers the whole prompt.
	if req.CacheControl != nil && len(blocks) > 0 {
		b := &blocks[len(blocks)-1]
		b.breakpoint = true
		b.oneHour = b.oneHour || strings.EqualFold(strings.TrimSpace(req.CacheControl.TTL), "1h")
	}
	return blocks
}

// chainHasher hashes a prompt block by block: each block's key is the hash of
// the previous key and the block's content, so a key identifies the whole
// prefix. Fields are length-prefixed so that no two prompts encode alike.
type chainHasher struct {
	prev prefixKey
	buf  []byte
}

func (h *chainHasher) begin(kind byte) {
	h.buf = append(h.buf[:0], h.prev[:]...)
	h.buf = append(h.buf, kind)
}

func (h *chainHasher) sum() prefixKey {
	h.prev = sha256.Sum256(h.buf)
	return h.prev
}

func (h *chainHasher) str(s string) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(s)))
	h.buf = append(h.buf, s...)
}

func (h *chainHasher) bytes(b []byte) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(b)))
	h.buf = append(h.buf, b...)
}

func (h *chainHasher) flag(b bool) {
	if b {
		h.buf = append(h.buf, 1)
	} else {
		h.buf = append(h.buf, 0)
	}
}

// part encodes every field of a part that a model would see; CacheControl is
// left out on purpose.
func (h *chainHasher) part(p *llm.Part) {
	h.str(string(p.Type))
	h.str(p.Text)
	h.str(p.MediaType)
	h.bytes(p.Data)
	h.str(p.URL)
	h.str(p.Title)
	h.str(p.Signature)
	h.flag(p.Redacted)
	h.flag(p.ToolCall != nil)
	if c := p.ToolCall; c != nil {
		h.str(c.ID)
		h.str(c.Name)
		h.bytes(c.Arguments)
		h.str(c.Signature)
	}
	h.flag(p.ToolResult != nil)
	if r := p.ToolResult; r != nil {
		h.str(r.CallID)
		h.str(r.Name)
		h.flag(r.IsError)
		h.buf = binary.AppendUvarint(h.buf, uint64(len(r.Content)))
		for i := range r.Content {
			h.part(&r.Content[i])
		}
	}
}
