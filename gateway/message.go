package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC error codes the gateway answers with on its own.
const (
	// CodeUpstreamUnavailable answers a request the upstream cannot take:
	// it could not be started, it died with the request in flight, or it is
	// being restarted. (JSON-RPC's internal error: from the client's side,
	// the server failed.)
	CodeUpstreamUnavailable = jsonrpc.CodeInternalError
	// CodeBusy answers an initialize beyond MaxSessions when every session
	// has work in flight.
	CodeBusy = -32000
)

func errorResponse(id jsonrpc.ID, code int64, format string, args ...any) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func mustID(v any) jsonrpc.ID {
	if n, ok := v.(int64); ok {
		v = float64(n) // MakeID takes numbers as JSON decodes them
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(fmt.Sprintf("gateway: invalid JSON-RPC id %v: %v", v, err)) // ids are made here, from strings and ints
	}
	return id
}

// paramString returns the string member name of params (a tool's name, a
// resource's uri), or "".
func paramString(params json.RawMessage, name string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil {
		return ""
	}
	var s string
	json.Unmarshal(obj[name], &s)
	return s
}

// progressToken returns params._meta.progressToken (requests) or
// params.progressToken (progress notifications), if there is one.
func progressToken(params json.RawMessage) (any, bool) {
	var p struct {
		Meta struct {
			ProgressToken any `json:"progressToken"`
		} `json:"_meta"`
		ProgressToken any `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil, false
	}
	if p.Meta.ProgressToken != nil {
		return p.Meta.ProgressToken, true
	}
	return p.ProgressToken, p.ProgressToken != nil
}

// withMember returns params with member path set to value (path is one key,
// or "_meta" and a key), everything else kept byte for byte.
func withMember(params json.RawMessage, value any, path ...string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, fmt.Errorf("params are not an object: %w", err)
		}
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if len(path) == 2 {
		inner, err := withMember(obj[path[0]], value, path[1])
		if err != nil {
			return nil, err
		}
		raw = inner
	}
	obj[path[0]] = raw
	return json.Marshal(obj)
}

// tokenKey makes a progress token usable as a map key: 1 and "1" are
// different tokens.
func tokenKey(tok any) string {
	b, _ := json.Marshal(tok)
	return string(b)
}
