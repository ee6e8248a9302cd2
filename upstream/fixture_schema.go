package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// This file generates JSON values from JSON Schemas for the fixture backend:
// tool-call arguments and JSON-mode replies. The generator is deterministic and
// aims to produce a value that validates, for the schemas clients actually
// send (OpenAI strict schemas, Pydantic and Zod output, Gemini's OpenAPI
// subset). It is not a complete JSON Schema implementation; what it honours
// is listed on schemaGen.value.

// Generator limits.
const (
	// optionalDepth is the nesting depth below which optional properties are
	// filled in; deeper objects get only their required properties, which
	// also stops recursive schemas whose recursion is optional.
	optionalDepth = 3
	// maxSchemaDepth stops schemas whose recursion is required (they have no
	// finite valid value anyway) and $ref cycles.
	maxSchemaDepth = 24
	// maxValues bounds the values one document generates, and maxPad the
	// characters a string is padded to, so that a schema asking for a
	// million items, or one that fans out recursively, cannot make the
	// fixture build them. Past the bound, values are null and arrays,
	// filler properties and strings stay short (and may not validate).
	maxValues = 10000
	maxPad    = 10000
)

// schemaGen generates values for one schema document.
type schemaGen struct {
	root   any // the parsed document, for resolving $ref
	values int // values generated so far, against maxValues
}

// parseSchema decodes a schema document, keeping numbers exact. It reports
// false for an empty or unparsable schema.
func parseSchema(raw []byte) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// marshalJSON encodes v compactly without HTML escaping; map keys come out
// sorted, so the same value always encodes to the same bytes.
func marshalJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Generated values hold only maps, slices, strings, json.Number,
		// float64, bools and nil; they always encode.
		return []byte("{}")
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// toolArguments returns a JSON object valid against the tool's parameters
// schema: `{}` when there is no schema or it does not describe an object.
func toolArguments(params []byte) []byte {
	root, ok := parseSchema(params)
	if !ok {
		return []byte("{}")
	}
	g := schemaGen{root: root}
	obj, ok := g.value(root, 0, 0).(map[string]any)
	if !ok {
		return []byte("{}")
	}
	return marshalJSON(obj)
}

// jsonReply returns a JSON value valid against a response-format schema; with
// no schema it returns {"reply": fallback}.
func jsonReply(schema []byte, fallback string) []byte {
	root, ok := parseSchema(schema)
	if !ok {
		return marshalJSON(map[string]any{"reply": fallback})
	}
	g := schemaGen{root: root}
	return marshalJSON(g.value(root, 0, 0))
}

// value generates a value valid against schema s, found depth levels into
// the document. variant makes sibling array items differ, so uniqueItems
// holds: strings get a suffix, numbers an offset, enums the next member,
// booleans alternate.
//
// It honours: type (a name or a list; the first non-null one; names in any
// case, as Gemini's OpenAPI schemas spell them in upper case), const, enum,
// properties and required (all required properties, plus the optional ones
// near the top), additionalProperties and minProperties, items (a schema or a
// draft-4 tuple), prefixItems, minItems and maxItems, minimum, maximum and
// their exclusive forms (draft 4 booleans and later numbers), multipleOf,
// minLength and maxLength, format (date, date-time, time, email, uri, url,
// uuid, hostname, ipv4, ipv6), anyOf and oneOf (the first branch that is not
// null), allOf (merged), and $ref to "#" or any JSON pointer in the document
// ("#/$defs/…", "#/definitions/…"). It ignores pattern, not, if/then/else and
// remote references. A schema without a type is typed by its keywords.
func (g *schemaGen) value(s any, depth, variant int) any {
	// Every call counts against the bound, even one that generates nothing,
	// so every loop that calls value ends.
	g.values++
	if depth > maxSchemaDepth || g.values > maxValues {
		return nil
	}
	m, ok := s.(map[string]any)
	if !ok {
		// true (anything goes), false (nothing does) or garbage.
		return "example"
	}
	if ref, ok := m["$ref"].(string); ok {
		return g.value(g.resolve(ref), depth+1, variant)
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[variant%len(e)]
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		return g.value(g.merge(m, "allOf", all), depth+1, variant)
	}
	for _, kw := range [...]string{"anyOf", "oneOf"} {
		if branches, ok := m[kw].([]any); ok && len(branches) > 0 {
			// The parent's own keywords (a shared type and properties, say)
			// still apply to the chosen branch.
			return g.value(g.merge(m, kw, []any{g.pickBranch(branches)}), depth+1, variant)
		}
	}
	switch schemaType(m) {
	case "object":
		return g.object(m, depth, variant)
	case "array":
		return g.array(m, depth)
	case "string":
		return stringValue(m, variant)
	case "integer":
		return integerValue(m, variant)
	case "number":
		return numberValue(m, variant)
	case "boolean":
		return variant%2 == 0
	case "null":
		return nil
	}
	return "example"
}

// schemaType returns the schema's type in lower case: the first non-null
// entry of a type list, "null" for a null-only schema, or a type inferred
// from the keywords when there is none.
func schemaType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return strings.ToLower(t)
	case []any:
		sawNull := false
		for _, x := range t {
			if s, ok := x.(string); ok {
				if s = strings.ToLower(s); s != "null" {
					return s
				}
				sawNull = true
			}
		}
		if sawNull {
			return "null"
		}
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := m[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties", "minProperties"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems"):
		return "array"
	case has("minLength", "maxLength", "format", "pattern"):
		return "string"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return ""
}

// resolve follows a local $ref. An unresolvable reference yields true (any
// value), so generation carries on.
func (g *schemaGen) resolve(ref string) any {
	if ref == "#" {
		return g.root
	}
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return true
	}
	cur := g.root
	for _, tok := range strings.Split(path, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return true
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return true
			}
			cur = c[i]
		default:
			return true
		}
	}
	return cur
}

// pickBranch returns the first anyOf/oneOf branch that is not null-only
// (Optional[X] is anyOf [X, null]; X is the more useful value), or the first
// branch when all are.
func (g *schemaGen) pickBranch(branches []any) any {
	for _, b := range branches {
		r := b
		for i := 0; i < maxSchemaDepth; i++ {
			m, ok := r.(map[string]any)
			if !ok {
				break
			}
			ref, ok := m["$ref"].(string)
			if !ok {
				break
			}
			r = g.resolve(ref)
		}
		if m, ok := r.(map[string]any); !ok || schemaType(m) != "null" {
			return b
		}
	}
	return branches[0]
}

// merge folds the parent schema, without its keyword skip, and the
// branches into one schema: properties are united, required lists joined,
// and any other keyword is taken from the first schema that has it (the
// parent first).
func (g *schemaGen) merge(parent map[string]any, skip string, all []any) map[string]any {
	out := make(map[string]any, len(parent))
	props := map[string]any{}
	var required []any
	add := func(m map[string]any) {
		for k, v := range m {
			switch k {
			case skip:
			case "properties":
				if pm, ok := v.(map[string]any); ok {
					for name, ps := range pm {
						if _, dup := props[name]; !dup {
							props[name] = ps
						}
					}
				}
			case "required":
				if rl, ok := v.([]any); ok {
					required = append(required, rl...)
				}
			default:
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	add(parent)
	for _, b := range all {
		for i := 0; i < maxSchemaDepth; i++ {
			m, ok := b.(map[string]any)
			if !ok {
				break
			}
			ref, ok := m["$ref"].(string)
			if !ok {
				break
			}
			b = g.resolve(ref)
		}
		if m, ok := b.(map[string]any); ok {
			add(m)
		}
	}
	delete(out, "$ref")
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// object generates an object: required properties always, optional ones
// near the top of the document, then filler properties up to minProperties.
// Members get the object's variant, so sibling objects in an array differ.
func (g *schemaGen) object(m map[string]any, depth, variant int) any {
	props, _ := m["properties"].(map[string]any)
	out := make(map[string]any, len(props))
	extra, hasExtra := m["additionalProperties"]
	if b, ok := extra.(bool); ok && b {
		hasExtra = false // true means "anything": same as absent
	}
	propSchema := func(name string) any {
		if ps, ok := props[name]; ok {
			return ps
		}
		if hasExtra {
			if _, isMap := extra.(map[string]any); isMap {
				return extra
			}
		}
		return true
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				out[name] = g.value(propSchema(name), depth+1, variant)
			}
		}
	}
	minProps, _ := intKeyword(m, "minProperties")
	if depth < optionalDepth || len(out) < minProps {
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if _, done := out[name]; !done && (depth < optionalDepth || len(out) < minProps) {
				out[name] = g.value(props[name], depth+1, variant)
			}
		}
	}
	if b, ok := extra.(bool); !(ok && !b) {
		for i := 1; len(out) < minProps && g.values < maxValues; i++ {
			name := fmt.Sprintf("property_%d", i)
			if _, taken := out[name]; !taken {
				out[name] = g.value(propSchema(name), depth+1, variant+i)
			}
		}
	}
	return out
}

// array generates min(max(minItems, 1, len(prefix)), maxItems) items.
func (g *schemaGen) array(m map[string]any, depth int) any {
	var prefix []any
	var rest any = true
	if p, ok := m["prefixItems"].([]any); ok {
		prefix = p
		if it, ok := m["items"]; ok {
			rest = it
		}
	} else if tuple, ok := m["items"].([]any); ok {
		prefix = tuple // draft 4 tuple form
		if ai, ok := m["additionalItems"]; ok {
			rest = ai
		}
	} else if it, ok := m["items"]; ok {
		rest = it
	}
	n := 1
	if minItems, ok := intKeyword(m, "minItems"); ok && minItems > n {
		n = minItems
	}
	n = max(n, len(prefix))
	if maxItems, ok := intKeyword(m, "maxItems"); ok && maxItems < n {
		n = max(maxItems, 0)
	}
	if b, ok := rest.(bool); ok && !b {
		n = min(n, len(prefix))
	}
	out := make([]any, 0, min(n, 64))
	for i := 0; i < n && (i == 0 || g.values < maxValues); i++ {
		s := rest
		if i < len(prefix) {
			s = prefix[i]
		}
		out = append(out, g.value(s, depth+1, i))
	}
	return out
}

// stringValue generates a string: a fixed example of the format, or
// "example" (with a variant suffix) fitted to minLength and maxLength.
func stringValue(m map[string]any, variant int) any {
	format, _ := m["format"].(string)
	switch strings.ToLower(format) {
	case "date":
		return fmt.Sprintf("2024-01-%02d", 1+variant%28)
	case "date-time":
		return fmt.Sprintf("2024-01-%02dT12:00:00Z", 1+variant%28)
	case "time":
		return fmt.Sprintf("12:%02d:00Z", variant%60)
	case "email":
		if variant > 0 {
			return fmt.Sprintf("user%d@example.com", variant+1)
		}
		return "user@example.com"
	case "uri", "url", "iri":
		if variant > 0 {
			return fmt.Sprintf("https://example.com/%d", variant+1)
		}
		return "https://example.com/"
	case "uuid":
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", variant)
	case "hostname":
		if variant > 0 {
			return fmt.Sprintf("host%d.example.com", variant+1)
		}
		return "example.com"
	case "ipv4":
		return fmt.Sprintf("192.0.2.%d", 1+variant%254)
	case "ipv6":
		return fmt.Sprintf("2001:db8::%x", 1+variant)
	}
	s := "example"
	if variant > 0 {
		s = fmt.Sprintf("example-%d", variant+1)
	}
	if minLen, ok := intKeyword(m, "minLength"); ok {
		if n := len([]rune(s)); n < minLen {
			s += strings.Repeat("x", max(min(minLen, maxPad)-n, 0))
		}
	}
	if maxLen, ok := intKeyword(m, "maxLength"); ok {
		if r := []rune(s); len(r) > maxLen {
			// Keep the variant's distinguishing tail where possible.
			if maxLen > 0 && variant > 0 {
				tail := []rune(strconv.Itoa(variant + 1))
				if len(tail) <= maxLen {
					return strings.Repeat("x", maxLen-len(tail)) + string(tail)
				}
			}
			s = string(r[:max(maxLen, 0)])
		}
	}
	return s
}

// bounds reads a numeric range: lo/hi and whether each is exclusive, from
// minimum/maximum plus draft 4 boolean or later numeric exclusive bounds.
type bounds struct {
	lo, hi         float64
	hasLo, hasHi   bool
	exclLo, exclHi bool
}

func readBounds(m map[string]any) bounds {
	var b bounds
	if v, ok := numKeyword(m, "minimum"); ok {
		b.lo, b.hasLo = v, true
	}
	if v, ok := numKeyword(m, "maximum"); ok {
		b.hi, b.hasHi = v, true
	}
	switch v := m["exclusiveMinimum"].(type) {
	case bool:
		b.exclLo = v && b.hasLo
	case json.Number:
		if f, err := v.Float64(); err == nil && (!b.hasLo || f >= b.lo) {
			b.lo, b.hasLo, b.exclLo = f, true, true
		}
	}
	switch v := m["exclusiveMaximum"].(type) {
	case bool:
		b.exclHi = v && b.hasHi
	case json.Number:
		if f, err := v.Float64(); err == nil && (!b.hasHi || f <= b.hi) {
			b.hi, b.hasHi, b.exclHi = f, true, true
		}
	}
	return b
}

// integerValue picks 1 (plus the variant) moved into the bounds and onto a
// multipleOf.
func integerValue(m map[string]any, variant int) any {
	b := readBounds(m)
	lo, hi := math.Inf(-1), math.Inf(1)
	if b.hasLo {
		lo = math.Ceil(b.lo)
		if b.exclLo && lo == b.lo {
			lo++
		}
	}
	if b.hasHi {
		hi = math.Floor(b.hi)
		if b.exclHi && hi == b.hi {
			hi--
		}
	}
	v := 1.0 + float64(variant)
	if v < lo {
		v = lo + float64(variant)
	}
	if v > hi {
		v = hi
		if !math.IsInf(lo, -1) && hi-lo+1 > 0 {
			v = lo + math.Mod(float64(variant), hi-lo+1)
		}
	}
	return fitMultiple(m, v, lo, hi)
}

// numberValue picks a whole number when the schema allows one: tool
// runners often read a JSON-Schema "number" as an integer (a count, a line,
// a timeout in seconds), and a whole number is valid wherever a fraction
// is. Only bounds that hold no integer, or a multipleOf none of whose
// nearby multiples is whole, make it pick a fraction: 1.5 (plus the
// variant) moved inside the bounds and onto the multipleOf.
func numberValue(m map[string]any, variant int) any {
	if v, ok := wholeNumber(m, variant); ok {
		return v
	}
	b := readBounds(m)
	v := 1.5 + float64(variant)
	lo, hi := math.Inf(-1), math.Inf(1)
	if b.hasLo {
		lo = b.lo
	}
	if b.hasHi {
		hi = b.hi
	}
	below := v < lo || (b.exclLo && v == lo)
	above := v > hi || (b.exclHi && v == hi)
	switch {
	case below && b.hasHi, above && b.hasLo:
		v = lo + (hi-lo)/2 // strictly inside (lo, hi)
	case below:
		v = lo + 1 + float64(variant)
	case above:
		v = hi - 1 - float64(variant)
	}
	return fitMultiple(m, v, lo, hi)
}

// wholeNumber is the integer a "number" schema gets when its bounds and
// multipleOf allow one; ok is false when they rule integers out.
func wholeNumber(m map[string]any, variant int) (json.Number, bool) {
	v, ok := integerValue(m, variant).(json.Number)
	if !ok {
		return "", false
	}
	f, err := v.Float64()
	if err != nil || f != math.Trunc(f) || !inBounds(readBounds(m), f) {
		// The bounds hold no integer: integerValue clamped outside them,
		// or fitMultiple moved it onto a fractional multiple. Look for a
		// whole multiple of multipleOf within reach instead.
		mult, has := numKeyword(m, "multipleOf")
		if !has || mult <= 0 || err != nil {
			return "", false
		}
		for k, end := math.Ceil(f/mult), math.Ceil(f/mult)+1000; k < end; k++ {
			x := k * mult
			if r := math.Round(x); math.Abs(x-r) < 1e-9 && inBounds(readBounds(m), r) {
				return json.Number(strconv.FormatFloat(r, 'f', 0, 64)), true
			}
		}
		return "", false
	}
	// Rendered without decimals: "1.0" (a multipleOf of 0.5 writes one)
	// is not an integer to a strict parser.
	return json.Number(strconv.FormatFloat(f, 'f', 0, 64)), true
}

// inBounds reports whether v satisfies the schema's bounds.
func inBounds(b bounds, v float64) bool {
	if b.hasLo && (v < b.lo || b.exclLo && v == b.lo) {
		return false
	}
	if b.hasHi && (v > b.hi || b.exclHi && v == b.hi) {
		return false
	}
	return true
}

// fitMultiple moves v onto a multiple of the schema's multipleOf, if any,
// preferring one within [lo, hi], and renders it. The multiple is rendered
// with as many decimals as multipleOf has, so that 3 × 0.1 comes out as 0.3,
// which validators that compute in decimals accept.
func fitMultiple(m map[string]any, v, lo, hi float64) json.Number {
	mult, ok := numKeyword(m, "multipleOf")
	if !ok || mult <= 0 {
		return json.Number(strconv.FormatFloat(v, 'f', -1, 64))
	}
	k := math.Ceil(v / mult)
	if x := k * mult; x > hi || x < lo {
		if d := math.Floor(v / mult); d*mult >= lo && d*mult <= hi {
			k = d
		}
	}
	decimals := -1
	if s := m["multipleOf"].(json.Number).String(); !strings.ContainsAny(s, "eE") {
		if _, frac, ok := strings.Cut(s, "."); ok {
			decimals = len(frac)
		} else {
			decimals = 0
		}
	}
	return json.Number(strconv.FormatFloat(k*mult, 'f', decimals, 64))
}

// intKeyword reads a non-negative integer keyword.
func intKeyword(m map[string]any, key string) (int, bool) {
	f, ok := numKeyword(m, key)
	if !ok || f < 0 || f > 1<<20 {
		return 0, false
	}
	return int(f), true
}

// numKeyword reads a numeric keyword.
func numKeyword(m map[string]any, key string) (float64, bool) {
	n, ok := m[key].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}
