package discovery

import "slices"

// Filter selects servers. The zero Filter selects every server.
type Filter struct {
	// Tool selects servers offering a tool of this name.
	Tool string
	// SchemaHash selects servers offering a tool that implements this
	// common schema, verified: a claim that does not match the tool's own
	// schemas never selects a server.
	SchemaHash string
	// Category selects servers whose tools announcement carries
	// ["t", Category].
	Category string
	// MaxPrice, if set, selects servers offering a tool (among those Tool and
	// SchemaHash select) that costs at most this much in its announced unit,
	// a range counting at its top; free tools always qualify.
	MaxPrice *float64
	// Encrypted selects servers that support encryption.
	Encrypted bool
}

// Match reports whether s is selected.
func (f Filter) Match(s Server) bool {
	if f.Encrypted && !s.Encryption {
		return false
	}
	if f.Category != "" && !slices.Contains(s.Categories, f.Category) {
		return false
	}
	if f.Tool == "" && f.SchemaHash == "" && f.MaxPrice == nil {
		return true
	}
	return slices.ContainsFunc(s.Tools, f.MatchTool)
}

// MatchTool reports whether t passes the tool conditions of f.
func (f Filter) MatchTool(t Tool) bool {
	switch {
	case f.Tool != "" && t.Name != f.Tool:
		return false
	case f.SchemaHash != "" && (!t.Verified || t.SchemaHash != f.SchemaHash):
		return false
	case f.MaxPrice != nil && t.Price.High() > *f.MaxPrice:
		return false
	}
	return true
}
