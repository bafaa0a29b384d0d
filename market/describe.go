package market

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DescribeInput names one server or one common schema.
type DescribeInput struct {
	Server string `json:"server,omitempty" jsonschema:"a server's npub or hex public key: its tools with their schemas and prices"`
	Schema string `json:"schema,omitempty" jsonschema:"a common schema hash, or a unique start of one: its providers, best first"`
}

// ToolDetail is a tool with its schemas, as describe reports it.
type ToolDetail struct {
	Offer
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// DescribeOutput is a server's tools, or a schema's providers.
type DescribeOutput struct {
	Server     string       `json:"server,omitempty"`
	ServerName string       `json:"serverName,omitempty"`
	About      string       `json:"about,omitempty"`
	Schema     string       `json:"schema,omitempty"`
	Tools      []ToolDetail `json:"tools"`
	// Excluded counts a schema's providers the trust policy rules out.
	Excluded int `json:"excluded,omitempty"`
}

var errServerOrSchema = errors.New("give server (an npub from search) or schema (a hash from search), one of them")

func (m *Market) describe(ctx context.Context, _ *mcp.CallToolRequest, in DescribeInput) (*mcp.CallToolResult, DescribeOutput, error) {
	if (in.Server == "") == (in.Schema == "") {
		return nil, DescribeOutput{}, errServerOrSchema
	}
	if in.Server != "" {
		s, err := m.lookup(ctx, in.Server)
		if err != nil {
			return nil, DescribeOutput{}, err
		}
		out := DescribeOutput{Server: s.Npub, ServerName: s.Name, About: s.About, Tools: []ToolDetail{}}
		for _, t := range s.Tools {
			out.Tools = append(out.Tools, m.detail(discovery.Provider{Server: s, Tool: t}, nil))
		}
		return nil, out, nil
	}
	o, err := m.schemaProviders(ctx, in.Schema)
	if err != nil {
		return nil, DescribeOutput{}, err
	}
	out := DescribeOutput{Schema: o.hash, Tools: []ToolDetail{}, Excluded: o.excluded}
	for _, p := range o.providers {
		out.Tools = append(out.Tools, m.detail(p, o.scores))
	}
	return nil, out, nil
}

func (m *Market) detail(p discovery.Provider, scores reputation.Scores) ToolDetail {
	return ToolDetail{Offer: m.offer(p, scores), InputSchema: p.Tool.InputSchema, OutputSchema: p.Tool.OutputSchema}
}

// lookup is the catalog's entry of the server key names, read from the
// relays, or an error that says what to do.
func (m *Market) lookup(ctx context.Context, key string) (discovery.Server, error) {
	pk, err := nostrx.ParsePublicKey(key)
	if err != nil {
		return discovery.Server{}, fmt.Errorf("unknown server %q: give its npub or hex public key, as search reports it", key)
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.FetchTimeout)
	defer cancel()
	s, ok, err := discovery.FetchServer(ctx, m.opts.Pool, pk.Key)
	switch {
	case ok:
		return s, nil
	case err != nil:
		return discovery.Server{}, fmt.Errorf("reading %s's announcements from %d relay(s): %w", key, len(m.opts.Pool.Relays()), err)
	}
	return discovery.Server{}, fmt.Errorf("unknown server %s: it announces nothing on the market's %d relay(s); find one with search", key, len(m.opts.Pool.Relays()))
}
