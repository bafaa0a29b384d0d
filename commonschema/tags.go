package commonschema

import (
	"strings"
	"unicode"

	"fiatjaf.com/nostr"
)

// ToolHash names a tool and its schema hash.
type ToolHash struct {
	Name string `json:"name"`
	Hash string `json:"schemaHash"`
}

// Tags returns the CEP-15 tags for the kind 11317 (tools/list) announcement
// of a server whose common tools are tools, in this order: one
// ["i", hash, name] per tool (NIP-73 external identifiers, so that clients
// can find every implementer with a "#i" filter), a single
// ["k", "io.contextvm/common-schema"], and one ["t", category] per category.
// Categories are trimmed (of what JavaScript's String.prototype.trim trims,
// as the reference does); blank and repeated ones are left out.
//
// With no tools there are no tags at all, categories included: categories
// describe common tools and are meaningless without them. The reference
// behaves the same way. The hashes are written as given; they are expected
// to come from Hash or Annotate.
func Tags(tools []ToolHash, categories []string) nostr.Tags {
	if len(tools) == 0 {
		return nil
	}
	tags := make(nostr.Tags, 0, len(tools)+1+len(categories))
	for _, t := range tools {
		tags = append(tags, nostr.Tag{"i", t.Hash, t.Name})
	}
	tags = append(tags, nostr.Tag{"k", Namespace})
	seen := make(map[string]bool, len(categories))
	for _, c := range categories {
		c = strings.TrimFunc(c, jsSpace)
		if c == "" || seen[c] {
			continue
		}
		seen[c] = true
		tags = append(tags, nostr.Tag{"t", c})
	}
	return tags
}

// jsSpace reports whether JavaScript's trim removes r. It differs from
// unicode.IsSpace in two code points: U+FEFF (a space to JavaScript) and
// U+0085 (not one).
func jsSpace(r rune) bool {
	return r == '\uFEFF' || (r != '\u0085' && unicode.IsSpace(r))
}
