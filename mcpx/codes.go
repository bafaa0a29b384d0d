package mcpx

// Code is the machine-readable reason in a gateway error envelope
// (payload.code) and in the JSON body of a refused HTTP request. MCPx v0
// names no codes (docs/mcpx.md, decision 4); these are cvm's, as strings so
// that a log line or a browser console reads without a table. Clients
// should switch on them, never on the message text. docs/error-codes.md
// mirrors this table.
type Code string

// Codes of error envelopes: a frame was refused, and nothing was published
// unless the code says otherwise.
const (
	// CodeInvalidEnvelope: not JSON, not an object, or a field of the
	// wrong type or value (the message names it).
	CodeInvalidEnvelope Code = "invalid_envelope"
	// CodeUnsupportedProtocol: protocol is not "mcp-x/v0".
	CodeUnsupportedProtocol Code = "unsupported_protocol"
	// CodeFromMismatch: from is not the participant the connection
	// authenticated as, or the connection was replaced by a newer one.
	CodeFromMismatch Code = "from_mismatch"
	// CodeRequestRecipients: an MCP request names no recipient, or more
	// than one (v0 §3.2: a request goes to exactly one participant).
	CodeRequestRecipients Code = "request_recipients"
	// CodeMissingCorrelation: an MCP response without correlation_id,
	// which is how its recipient finds the request.
	CodeMissingCorrelation Code = "missing_correlation"
	// CodeReservedKind: a participant sent kind presence or system, which
	// only the gateway sends.
	CodeReservedKind Code = "reserved_kind"
	// CodeTooLarge: the frame is over the gateway's size limit; it was
	// discarded and the connection stays.
	CodeTooLarge Code = "too_large"
	// CodeRateLimited: over the participant's rate; payload.retry_after_ms
	// says when to send again.
	CodeRateLimited Code = "rate_limited"
	// CodeUnknownRecipient: some recipients are not in the topic. The
	// envelope WAS published (and is in history) for the others; this
	// reports who did not get it live.
	CodeUnknownRecipient Code = "unknown_recipient"
	// CodeInternal: the gateway failed (history could not store it); the
	// envelope was not published.
	CodeInternal Code = "internal"
	// CodeUnavailable: a clustered gateway (cvm room serve --nats) has
	// lost its link to NATS, so the envelope could not be stored or
	// delivered; it was not published. payload.retry_after_ms says when to
	// send it again. The connection stays open.
	CodeUnavailable Code = "unavailable"
)

// Codes of refused HTTP requests (the WebSocket upgrade, REST), in a JSON
// body {"error": message, "code": code} beside the HTTP status.
const (
	// CodeUnauthorized (401): no token, or a malformed, expired or badly
	// signed one.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden (403): the token is valid but not for this topic.
	CodeForbidden Code = "forbidden"
	// CodeBadOrigin (403): a browser's Origin that the gateway does not
	// allow (cvm room serve --allow-origin).
	CodeBadOrigin Code = "forbidden_origin"
	// CodeTopicFull (403): the topic has its maximum of participants.
	CodeTopicFull Code = "topic_full"
	// CodeBadRequest (400, or 426 without an upgrade): a missing or
	// malformed parameter.
	CodeBadRequest Code = "bad_request"
	// CodeUnknownCursor (400): a history cursor names no stored envelope.
	CodeUnknownCursor Code = "unknown_cursor"
	// CodeNotFound (404): no such endpoint, or history is off.
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllow (405): the endpoint exists, the method does not.
	CodeMethodNotAllow Code = "method_not_allowed"
)

// JSON-RPC error codes that MCPx participants in cvm answer MCP requests
// with on their own, besides JSON-RPC's standard ones (-32600 a request
// before initialize, -32601 a method nobody serves, -32603 a peer or server
// that failed).
const (
	// CodeRequestTimeout answers a request that got no answer in time; the
	// peer was sent notifications/cancelled. It is the TypeScript MCP SDK's
	// ErrorCode.RequestTimeout, in the range JSON-RPC leaves to
	// implementations (-32000 to -32099), so MCP clients in either language
	// recognize it. ContextVM uses the same number for the same reason.
	CodeRequestTimeout = -32001
)
