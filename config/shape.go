package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkShape walks the document as written against the Go type it decodes
// into (fileConfig and what it holds) and reports, at their lines and in
// the file's own terms, every key the format does not have and every value
// of the wrong kind. It never stops at the first: a file's errors come in
// one pass. Values held as yaml.Node (routes, prices) are free-form here
// and checked by their sections (routes.go, prices.go).
//
// What it accepts, the YAML decoder decodes without a type error: Load
// relies on that to report every error in the file's terms, and FuzzLoad
// holds it to it.
func checkShape(n *yaml.Node, t reflect.Type, path string, report func(line int, format string, args ...any)) {
	if n == nil {
		return
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			checkShape(c, t, path, report)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if t == reflect.TypeFor[yaml.Node]() || isNull(n) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			report(n.Line, "%s: want a mapping of keys (%s), not %s", where(path), strings.Join(yamlKeys(t), ", "), describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByKey(t, k.Value)
			if !ok {
				report(k.Line, "unknown key %q%s%s", k.Value, in(path), suggest(k.Value, yamlKeys(t)))
				continue
			}
			checkShape(v, f.Type, join(path, k.Value), report)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			report(n.Line, "%s: want a mapping of names to settings, not %s", where(path), describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := deref(n.Content[i]); k.Kind != yaml.ScalarNode {
				report(k.Line, "%s: want a name as the key, not %s", where(path), describe(k))
				continue
			}
			checkShape(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), report)
		}
	case reflect.Pointer: // an optional value: nil when the file leaves it out
		checkShape(n, t.Elem(), path, report)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			report(n.Line, "%s: want a string, not %s", where(path), describe(n))
		}
	case reflect.Int, reflect.Int64:
		scalar(n, t, path, "a whole number", report)
	case reflect.Float64:
		scalar(n, t, path, "a number", report)
	case reflect.Bool:
		scalar(n, t, path, "true or false", report)
	}
}

// scalar checks that n decodes into a value of type t, as the YAML decoder
// will read it.
func scalar(n *yaml.Node, t reflect.Type, path, want string, report func(int, string, ...any)) {
	if n.Kind != yaml.ScalarNode {
		report(n.Line, "%s: want %s, not %s", where(path), want, describe(n))
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		hint := ""
		if strings.Contains(n.Value, "${") {
			hint = " (${VAR} is expanded in string values only)"
		}
		report(n.Line, "%s: want %s, not %q%s", where(path), want, n.Value, hint)
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "want X, not Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

func in(path string) string {
	if path == "" {
		return " at the top level"
	}
	return " in " + path
}

// fieldByKey finds the field of struct type t that the YAML key names.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlKeys lists the keys of struct type t, sorted.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	sort.Strings(keys)
	return keys
}

// suggest names the known key closest to a misspelt one, or lists them all
// when none is close.
func suggest(key string, known []string) string {
	best, bestD := "", len(key)/2+2 // farther than this is not a typo
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return " (did you mean " + best + "?)"
	}
	return " (want " + strings.Join(known, ", ") + ")"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
