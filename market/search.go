package market

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SearchInput is what the search tool takes; every field narrows.
type SearchInput struct {
	Query    string   `json:"query,omitempty" jsonschema:"words to find in a tool's or a server's name and description"`
	Schema   string   `json:"schema,omitempty" jsonschema:"a common schema hash, or a unique start of one: its verified implementations only"`
	Category string   `json:"category,omitempty" jsonschema:"a category a server announces (t tag)"`
	MaxPrice *float64 `json:"maxPrice,omitempty" jsonschema:"the most a call may cost, in the tool's unit (sats mostly); free tools always match"`
}

// Offer is one tool of one server, as search and describe report it.
type Offer struct {
	Server      string            `json:"server" jsonschema:"the server's npub, to give describe and call"`
	ServerName  string            `json:"serverName,omitempty"`
	Tool        string            `json:"tool"`
	Description string            `json:"description,omitempty"`
	Price       *discovery.Price  `json:"price,omitempty" jsonschema:"absent: free"`
	Schema      string            `json:"schema,omitempty" jsonschema:"the common schema hash the tool implements, verified"`
	Trusted     bool              `json:"trusted"`
	Reputation  *reputation.Score `json:"reputation,omitempty"`
	Why         string            `json:"why" jsonschema:"why it ranks where it does"`
}

// SearchOutput lists the offers found, best first.
type SearchOutput struct {
	Offers []Offer `json:"offers"`
}

func (m *Market) search(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, SearchOutput, error) {
	catalog, err := m.catalog(ctx, discovery.Filter{Category: in.Category})
	if err != nil {
		return nil, SearchOutput{}, err
	}
	f := discovery.Filter{Category: in.Category, MaxPrice: in.MaxPrice}
	if in.Schema != "" {
		if f.SchemaHash, err = resolveSchema(catalog, in.Schema); err != nil {
			return nil, SearchOutput{}, err
		}
	}
	words := strings.Fields(strings.ToLower(in.Query))
	var found []discovery.Provider
	for _, s := range catalog.Servers(f) {
		for _, t := range s.Tools {
			if f.MatchTool(t) && matches(words, s, t) {
				found = append(found, discovery.Provider{Server: s, Tool: t})
			}
		}
	}
	ranking, scores := m.ranking(ctx, serversOf(found))
	discovery.Choose(found, ranking)
	out := SearchOutput{Offers: []Offer{}}
	for _, p := range found {
		out.Offers = append(out.Offers, m.offer(p, scores))
	}
	return nil, out, nil
}

// matches reports whether every word is in the tool's or the server's
// name or description.
func matches(words []string, s discovery.Server, t discovery.Tool) bool {
	text := strings.ToLower(strings.Join([]string{t.Name, t.Description, s.Name, s.About}, " "))
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

func serversOf(ps []discovery.Provider) []discovery.Server {
	var out []discovery.Server
	seen := map[string]bool{}
	for _, p := range ps {
		if !seen[p.Server.Npub] {
			seen[p.Server.Npub] = true
			out = append(out, p.Server)
		}
	}
	return out
}

// offer reports p with the reasons of its rank: trust, reputation, price.
func (m *Market) offer(p discovery.Provider, scores reputation.Scores) Offer {
	o := Offer{Server: p.Server.Npub, ServerName: p.Server.Name, Tool: p.Tool.Name, Description: p.Tool.Description,
		Price: p.Tool.Price, Trusted: m.opts.Trusted[p.Server.Pubkey]}
	if p.Tool.Verified {
		o.Schema = p.Tool.SchemaHash
	}
	var why []string
	if o.Trusted {
		why = append(why, "trusted by you")
	} else {
		why = append(why, "not on your trust list (trust policy "+m.opts.Policy.String()+")")
	}
	if sc, ok := scores[p.Server.Pubkey]; ok {
		o.Reputation = &sc
		why = append(why, fmt.Sprintf("reputation %.1f: %s", sc.Value, sc.Why))
	}
	why = append(why, p.Tool.Price.String())
	o.Why = strings.Join(why, "; ")
	return o
}

// resolveSchema is the one schema hash the catalog knows that starts with
// prefix, or an error that says what to do.
func resolveSchema(c *discovery.Catalog, prefix string) (string, error) {
	hash, err := c.ResolveSchema(strings.ToLower(prefix))
	if amb := (*discovery.AmbiguousSchemaError)(nil); errors.As(err, &amb) {
		return "", fmt.Errorf("%w; give more of the hash", err)
	}
	if errors.Is(err, discovery.ErrNoSchema) {
		return "", fmt.Errorf("no server announces a tool of common schema %s; search by words instead (search with query)", prefix)
	}
	return hash, err
}
