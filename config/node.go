package config

import "go.yaml.in/yaml/v3"

// entry is one key of a mapping in the file and its value: the key's line
// is where an error about the entry points, as editors do. Both are nil
// when the file does not have the key; get and line work on that too.
type entry struct{ key, value *yaml.Node }

// field is the entry of key in mapping m.
func field(m *yaml.Node, key string) entry {
	for _, e := range entries(m) {
		if e.key.Value == key {
			return e
		}
	}
	return entry{}
}

// get is the entry at the path of keys below e: e.get("timeouts", "idle").
func (e entry) get(keys ...string) entry {
	for _, k := range keys {
		e = field(e.value, k)
	}
	return e
}

// line is the line of e's key, or 0 when the file does not have it.
func (e entry) line() int {
	if e.key == nil {
		return 0
	}
	return e.key.Line
}

// entries lists the entries of mapping n in file order; none when n is
// not a mapping (checkShape reports that where it matters).
func entries(n *yaml.Node) []entry {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	es := make([]entry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		es = append(es, entry{n.Content[i], n.Content[i+1]})
	}
	return es
}

// deref is the node an alias names (n itself when it is not an alias).
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// topLevel is the document's top-level mapping, or nil for an empty
// document (or one that is not a mapping, which checkShape reports).
func topLevel(root *yaml.Node) *yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	return root.Content[0]
}

// dropDuplicates reports every key written twice in one mapping, at its
// second line, and drops that second entry, so that what follows reads
// the first as the file's and goes on to report the rest. (The YAML
// decoder would refuse the whole mapping.)
func dropDuplicates(n *yaml.Node, report func(line int, format string, args ...any)) {
	if n.Kind == yaml.MappingNode {
		first := map[string]int{} // key → its line
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode {
				if line, dup := first[k.Value]; dup {
					report(k.Line, "mapping key %q already defined at line %d", k.Value, line)
					continue
				}
				first[k.Value] = k.Line
			}
			kept = append(kept, k, n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropDuplicates(c, report)
	}
}
