package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
)

// Schema is a common schema as a catalog knows it: the servers whose tools
// claim its hash, and how many of those claims hold.
type Schema struct {
	Hash string `json:"hash"`
	// Tool is the tool's name (the hash covers it): that of a verified
	// claim when there is one.
	Tool string `json:"tool"`
	// Claimed counts the servers whose announcement claims the hash for a
	// tool; Verified those whose tool's own schemas hash to it.
	Claimed  int `json:"claimed"`
	Verified int `json:"verified"`
	// Categories are the categories ("t" tags) of the claiming servers'
	// tools announcements.
	Categories []string `json:"categories"`
}

// FetchSchemas adds to c every server whose tools announcement is marked
// as carrying common schema hashes (["k", commonschema.Namespace], NIP-73),
// with all its announcements. It returns when every relay has answered or
// ctx ends.
func (c *Catalog) FetchSchemas(ctx context.Context, pool *nostrx.Pool) error {
	found, err := pool.Query(ctx, nostr.Filter{Kinds: []nostr.Kind{contextvm.KindToolsList}, Tags: nostr.TagMap{"k": {commonschema.Namespace}}})
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	var authors []nostr.PubKey
	for _, e := range found {
		if !slices.Contains(authors, e.PubKey) {
			authors = append(authors, e.PubKey)
		}
	}
	return c.fetchAuthors(ctx, pool, authors)
}

// Schemas lists the common schemas the catalog's servers claim, the most
// verified implementations first, then the most claimed, then by hash.
func (c *Catalog) Schemas() []Schema {
	byHash := map[string]*Schema{}
	for _, s := range c.Servers(Filter{}) {
		seen := map[string]bool{} // a server counts once per schema
		for _, t := range s.Tools {
			if t.SchemaHash == "" || seen[t.SchemaHash] {
				continue
			}
			seen[t.SchemaHash] = true
			sc := byHash[t.SchemaHash]
			if sc == nil {
				sc = &Schema{Hash: t.SchemaHash, Tool: t.Name, Categories: []string{}}
				byHash[t.SchemaHash] = sc
			}
			sc.Claimed++
			if t.Verified {
				if sc.Verified == 0 {
					sc.Tool = t.Name
				}
				sc.Verified++
			}
			for _, cat := range s.Categories {
				if !slices.Contains(sc.Categories, cat) {
					sc.Categories = append(sc.Categories, cat)
				}
			}
		}
	}
	out := make([]Schema, 0, len(byHash))
	for _, sc := range byHash {
		slices.Sort(sc.Categories)
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b Schema) int {
		return cmp.Or(cmp.Compare(b.Verified, a.Verified), cmp.Compare(b.Claimed, a.Claimed), cmp.Compare(a.Hash, b.Hash))
	})
	return out
}

// ErrNoSchema is returned by ResolveSchema when no schema hash the catalog
// knows starts with the prefix.
var ErrNoSchema = errors.New("no common schema hash starts with that prefix")

// AmbiguousSchemaError is returned by ResolveSchema when several schema
// hashes start with the prefix: Candidates are their schemas.
type AmbiguousSchemaError struct {
	Prefix     string
	Candidates []Schema
}

func (e *AmbiguousSchemaError) Error() string {
	names := make([]string, len(e.Candidates))
	for i, sc := range e.Candidates {
		names[i] = fmt.Sprintf("%s (%s, verified by %d of %d servers)", sc.Hash, sc.Tool, sc.Verified, sc.Claimed)
	}
	return fmt.Sprintf("%d common schema hashes start with %s: %s", len(e.Candidates), e.Prefix, strings.Join(names, "; "))
}

// ResolveSchema returns the one schema hash claimed in the catalog that
// starts with prefix (lower-case hex; a whole hash is a prefix of itself),
// so that people can give the short hashes they are shown. It fails with
// ErrNoSchema when none does, and with an *AmbiguousSchemaError naming
// them all when several do.
func (c *Catalog) ResolveSchema(prefix string) (string, error) {
	var found []Schema
	for _, sc := range c.Schemas() {
		if strings.HasPrefix(sc.Hash, prefix) {
			found = append(found, sc)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("discovery: %w: %s", ErrNoSchema, prefix)
	case 1:
		return found[0].Hash, nil
	}
	return "", &AmbiguousSchemaError{Prefix: prefix, Candidates: found}
}
