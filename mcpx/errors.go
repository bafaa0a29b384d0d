package mcpx

import (
	"fmt"
)

// Code is the machine-readable reason in a gateway error envelope
// (payload.code) and in the JSON body of a refused HTTP request.
type Code string

// The codes the gateway emits. Clients should switch on these, not on the
// message text.
const (
	CodeInvalidEnvelope     Code = "invalid_envelope"     // not JSON, wrong schema, bad field
	CodeUnsupportedProtocol Code = "unsupported_protocol" // protocol is not mcp-x/v0
	CodeFromMismatch        Code = "from_mismatch"        // from is not the authenticated participant
	CodeRequestRecipients   Code = "request_recipients"   // a request does not name exactly one recipient
	CodeMissingCorrelation  Code = "missing_correlation"  // a response without correlation_id
	CodeReservedKind        Code = "reserved_kind"        // presence or system sent by a participant
	CodeTooLarge            Code = "too_large"            // frame over the size limit
	CodeRateLimited         Code = "rate_limited"         // over the participant's rate; see retry_after_ms
	CodeUnknownRecipient    Code = "unknown_recipient"    // some recipients are not in the topic
	CodeInternal            Code = "internal"             // the gateway failed; the envelope was not published

	// HTTP-only codes.
	CodeUnauthorized   Code = "unauthorized"     // no, malformed, expired or badly signed token
	CodeForbidden      Code = "forbidden"        // the token is not for this topic
	CodeBadOrigin      Code = "forbidden_origin" // the Origin is not allowed
	CodeTopicFull      Code = "topic_full"       // max participants reached
	CodeBadRequest     Code = "bad_request"      // a missing or malformed parameter
	CodeUnknownCursor  Code = "unknown_cursor"   // a history cursor names no stored envelope
	CodeNotFound       Code = "not_found"        // no such endpoint
	CodeMethodNotAllow Code = "method_not_allowed"
)

// EnvelopeError is why a frame was refused. EnvelopeID is the refused
// envelope's id when it could be read, so the error envelope can carry it as
// correlation_id.
type EnvelopeError struct {
	Code       Code
	EnvelopeID string
	Message    string
}

func (e *EnvelopeError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func invalid(id, format string, args ...any) *EnvelopeError {
	return &EnvelopeError{Code: CodeInvalidEnvelope, EnvelopeID: id, Message: fmt.Sprintf(format, args...)}
}

// DefaultProtocolVersion is the MCP version the client and the bridge ask
// for in initialize. Peers negotiate down (MCPx v0 requires at least the
// 2025-06-18 negotiation rules); the TypeScript SDK tops out here.
const DefaultProtocolVersion = "2025-11-25"

// CodeRequestTimeout is MCP's JSON-RPC code for a request that got no answer
// in time (the TypeScript SDK's ErrorCode.RequestTimeout); the client answers
// a go-sdk session with it when a peer stays silent.
const CodeRequestTimeout = -32001
