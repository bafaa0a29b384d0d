package market

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A mount is a server, or a common schema, whose tools are the market's
// own (Options.Mounts).
type mount struct {
	server nostr.PubKey // or
	schema string
}

// parseMounts reads Options.Mounts: a server's public key (npub, nprofile
// or hex), else a common schema hash.
func parseMounts(specs []string) ([]mount, error) {
	var out []mount
	for _, s := range specs {
		if pk, err := nostrx.ParsePublicKey(s); err == nil && !schemaHash.MatchString(s) {
			out = append(out, mount{server: pk.Key})
			continue
		}
		if !schemaHash.MatchString(strings.ToLower(s)) {
			return nil, fmt.Errorf("market: mount %q is neither a server's public key (npub, nprofile, hex) nor a common schema hash (64 hex digits)", s)
		}
		out = append(out, mount{schema: strings.ToLower(s)})
	}
	return out, nil
}

// schemaHash is a whole common schema hash. A hex public key looks the
// same: a mount of 64 hex digits is a schema, a server is given as npub.
var schemaHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// mounted is one tool the market offers for a mount: its name there, and
// what a call of it calls.
type mounted struct {
	tool *mcp.Tool
	call CallInput
	// key tells when the tool changed: its announced schema and price.
	key string
}

// Mount keeps the mounted servers' and schemas' tools among the market's
// own until ctx ends: it reads the catalog, then follows the relays, and
// each change of a mounted tool (new, changed, gone) changes the market's
// tool list, which the SDK tells connected hosts of
// (notifications/tools/list_changed). Without Mounts it returns at once.
func (m *Market) Mount(ctx context.Context) error {
	if len(m.mounts) == 0 {
		return nil
	}
	catalog := discovery.NewCatalog()
	fctx, cancel := context.WithTimeout(ctx, m.opts.FetchTimeout)
	err := catalog.Fetch(fctx, m.opts.Pool, discovery.Filter{})
	cancel()
	if err != nil {
		m.log.Warn("could not read the whole catalog; mounting what was read", "err", err)
	}
	current := map[string]mounted{}
	m.remount(catalog, current)
	return catalog.Watch(ctx, m.opts.Pool, func(nostr.PubKey) { m.remount(catalog, current) })
}

// remount brings the market's mounted tools (current, by name) in line
// with the catalog.
func (m *Market) remount(catalog *discovery.Catalog, current map[string]mounted) {
	want := m.mountedTools(catalog)
	var gone []string
	for name, t := range current {
		if w, ok := want[name]; !ok || w.key != t.key {
			gone = append(gone, name)
			delete(current, name)
		}
	}
	if len(gone) > 0 {
		m.server.RemoveTools(gone...)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := current[name]; ok {
			continue
		}
		if m.addMounted(want[name]) {
			current[name] = want[name]
		}
	}
}

// addMounted adds t to the market's tools. The SDK panics on a schema it
// will not serve; an announced schema is anyone's input, so that tool is
// left out, logged.
func (m *Market) addMounted(t mounted) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Warn("not mounting a tool the MCP SDK refuses", "tool", t.tool.Name, "reason", fmt.Sprint(r))
			ok = false
		}
	}()
	call := t.call
	m.server.AddTool(t.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		in := call
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in.Arguments); err != nil {
				return errorResult(fmt.Errorf("the arguments are no JSON object: %w", err)), nil
			}
		}
		res, _, err := m.call(ctx, req, in)
		if err != nil {
			return errorResult(err), nil
		}
		return res, nil
	})
	return true
}

func errorResult(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}

// mountedTools are the tools the mounts offer now, by their names in the
// market: a server's as SERVER__TOOL (its name, made safe, and the start of
// its key), a schema's as TOOL__HASH (the start of the hash).
func (m *Market) mountedTools(catalog *discovery.Catalog) map[string]mounted {
	out := map[string]mounted{}
	for _, mt := range m.mounts {
		if mt.schema != "" {
			providers, _ := catalog.Providers(mt.schema, discovery.Ranking{Policy: m.opts.Policy, Trusted: m.opts.Trusted})
			if len(providers) == 0 {
				continue
			}
			t := providers[0].Tool
			name := toolName(t.Name) + "__" + mt.schema[:8]
			add(out, name, t, fmt.Sprintf("%s (common schema %s, on its best provider of %d)", t.Description, mt.schema[:12], len(providers)),
				CallInput{Schema: mt.schema, Tool: t.Name}, providers)
			continue
		}
		s, ok := catalog.Server(mt.server)
		if !ok {
			continue
		}
		prefix := toolName(s.Name)
		if prefix == "" {
			prefix = "server"
		}
		prefix += "-" + s.Npub[5:11] + "__"
		for _, t := range s.Tools {
			add(out, prefix+toolName(t.Name), t, fmt.Sprintf("%s (on %s, %s)", t.Description, s.Name, t.Price),
				CallInput{Server: s.Npub, Tool: t.Name}, []discovery.Provider{{Server: s, Tool: t}})
		}
	}
	return out
}

// add puts a mounted tool in out, unless its input schema is no object.
func add(out map[string]mounted, name string, t discovery.Tool, description string, call CallInput, providers []discovery.Provider) {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var obj map[string]any
	if json.Unmarshal(schema, &obj) != nil || obj["type"] != "object" {
		return
	}
	key, _ := json.Marshal([]any{schema, providers[0].Server.Npub, providers[0].Tool.Price, len(providers)})
	out[name] = mounted{tool: &mcp.Tool{Name: name, Description: strings.TrimSpace(description), InputSchema: schema}, call: call, key: string(key)}
}

// toolName is s with only the characters MCP tool names take, at most 48.
func toolName(s string) string {
	s = strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 48 {
		s = s[:48]
	}
	return s
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_.-]+`)
