package mcpmsg

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// IntID is a numeric JSON-RPC id. Relays number their requests with
// counters, which stay far below 2^53, where a JSON number would lose
// precision in a JavaScript peer.
func IntID(n int64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(float64(n)) // MakeID takes numbers as JSON decodes them
	return id
}

// StringID is a string JSON-RPC id.
func StringID(s string) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(s)
	return id
}

// Result is a successful answer to id.
func Result(id jsonrpc.ID, result json.RawMessage) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Result: result}
}

// EmptyResult is the answer {} to id (ping, subscribe, shutdown).
func EmptyResult(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}
}

// ErrorResponse is a JSON-RPC error answer to id.
func ErrorResponse(id jsonrpc.ID, code int64, format string, args ...any) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// CancelledRequest returns the requestId and reason of the params of a
// notifications/cancelled; ok is false if there is no valid id.
func CancelledRequest(params json.RawMessage) (id jsonrpc.ID, reason string, ok bool) {
	var p struct {
		RequestID any    `json:"requestId"`
		Reason    string `json:"reason"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return jsonrpc.ID{}, "", false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return jsonrpc.ID{}, "", false
	}
	return id, p.Reason, true
}

// Cancelled is a notifications/cancelled for the request id.
func Cancelled(id jsonrpc.ID, reason string) *jsonrpc.Request {
	p := map[string]any{"requestId": id.Raw()}
	if reason != "" {
		p["reason"] = reason
	}
	params, _ := Marshal(p)
	return &jsonrpc.Request{Method: MethodCancelled, Params: params}
}

// WithCancelledRequest returns a copy of the notifications/cancelled m that
// names the request id instead, its other params kept.
func WithCancelledRequest(m *jsonrpc.Request, id jsonrpc.ID) (*jsonrpc.Request, error) {
	raw, err := Marshal(id.Raw())
	if err != nil {
		return nil, err
	}
	params, err := SetMember(m.Params, raw, "requestId")
	if err != nil {
		return nil, fmt.Errorf("mcpmsg: %s params: %w", m.Method, err)
	}
	out := *m
	out.Params = params
	return &out, nil
}
