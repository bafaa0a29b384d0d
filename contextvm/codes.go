package contextvm

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC error codes that the ContextVM side of cvm answers with on its
// own, rather than passing on a peer's answer. docs/error-codes.md has the
// same table for readers who do not read Go.
//
// JSON-RPC 2.0 keeps -32768..-32000 for itself: -32700..-32600 are its
// standard errors and -32000..-32099 are "reserved for implementation-defined
// server errors". MCP leaves that range to implementations too, so numbers
// in it mean only what the implementation that sent them says. cvm's choices:
// where a peer already gives a number a meaning (the reference ContextVM SDK,
// the TypeScript MCP SDK it is built on), cvm uses that number for that
// meaning, so that one client can read either server; everything of cvm's
// own lives in -32010..-32019, clear of the numbers the MCP SDKs use (the
// TypeScript SDK: -32000, -32001, -32042; go-sdk: -32002, -32020..-32022,
// -32042).
//
// Seed 002's table gives -32001..-32007 other meanings ("Resource not
// found", "Resource access denied", …). No MCP SDK uses that table: the MCP
// specification and go-sdk answer a missing resource with -32002, and the
// TypeScript SDK, which every reference peer runs, uses -32001 for a request
// timeout. cvm follows the SDKs, because their clients read its errors.
const (
	// CodeUnauthorized answers a request that the server's authorization
	// (AllowedClients, PublicCapabilities, Authorize) refused. -32000 is
	// what the reference SDK answers ({"code":-32000,"message":"Unauthorized"}),
	// so a client written for it recognizes the refusal.
	CodeUnauthorized = -32000

	// CodeRequestTimeout answers, locally, a client request that got no
	// response within ClientOptions.RequestTimeout, or that every relay
	// accepted while nobody was listening (ErrServerNotListening).
	// -32001 is the TypeScript MCP SDK's ErrorCode.RequestTimeout (its
	// ErrorCode.ConnectionClosed is -32000), so a host that handles the
	// SDK's timeouts handles these.
	CodeRequestTimeout = -32001

	// CodeTransportError answers a request that the transport failed rather
	// than the peer: the client could not deliver it (signing, encoding,
	// every relay refusing it), a fragmented answer to it was aborted, a
	// server-to-client request could not be published, or its server session
	// closed before it was answered. It is JSON-RPC's "internal error",
	// -32603: nothing more specific is true of all of them, and the message
	// says which it was.
	CodeTransportError = -32603

	// CodeEncryptionNotAccepted answers a gift-wrapped request sent to a
	// server that has encryption disabled, in plaintext. The reference
	// drops such a request, and its client times out; an optional-mode cvm
	// client that reads this code falls back to plaintext at once. First of
	// cvm's own block, -32010..-32019.
	CodeEncryptionNotAccepted = -32010

	// CodeEncryptionRequired answers a plaintext request sent to a server
	// that requires encryption. The reference drops it in silence.
	CodeEncryptionRequired = -32011

	// CodeResponseTooLarge answers a request whose answer fits neither in
	// one event (MaxEventBytes, and NIP-44's 65,535-byte plaintext when
	// wrapped) nor in CEP-22 fragments (the client sent no progress token,
	// or does not support oversized transfers); the client also gets it for
	// a request of its own that it could not send in fragments. The
	// reference publishes such an event anyway, and relays refuse it.
	CodeResponseTooLarge = -32012

	// CodeServerBusy answers a request the server did not act on for want
	// of room: its session's inbox is full, no session could be started
	// for its client (all MaxSessions in use, or for a client outside
	// AllowedClients all but SessionReserve of them; or new sessions coming
	// too fast), or the store of executed requests is full. Retry later; the
	// error's data says when, where the server knows (see RetryAfter). It
	// has a number of its own, not -32000, so that a client can tell
	// "retry later" from "you may not" (CodeUnauthorized).
	CodeServerBusy = -32013
)

// Error codes of replica groups (ServerOptions.Replicas, cvm gateway --nats).
const (
	// CodeReplicaUnavailable answers a request that a replica of a group
	// claimed in the group's store and did not run: it held the request
	// for too long while it could not coordinate it (docs/replicas.md), or
	// could not record it or read its session after the claim. The claim
	// makes the answer true: it did not run, and no replica runs it; a
	// retry is safe. A replica that cannot coordinate never sends it (it
	// cannot know whether another replica runs the request): it holds the
	// request. data.retry_after_ms is the membership timeout; a cvm client
	// waits that long for another answer to the same request before it
	// takes this one.
	CodeReplicaUnavailable = -32018
	// CodeReplicaLost answers, from a surviving replica, a call that was in
	// flight on a replica that died (unheard for the membership timeout).
	// It may or may not have taken effect, and is never run again: retry
	// it as a new call if that is safe.
	CodeReplicaLost = -32019
)

// ReplicaUnavailableError is a CodeReplicaUnavailable error that asks the
// client to retry after wait.
func ReplicaUnavailableError(wait time.Duration) *jsonrpc.Error {
	ms := max((wait+time.Millisecond-1)/time.Millisecond, 1)
	data, _ := json.Marshal(retryAfterData{RetryAfterMS: int64(ms)})
	return &jsonrpc.Error{Code: CodeReplicaUnavailable,
		Message: "the replica group serving this key could not coordinate the request in time: it did not run, and no replica will run it; retry", Data: data}
}

// Error codes of payments (CEP-8): see package contextvm/cep8 and
// PayOptions.
const (
	// CodePaymentRejected answers a priced request whose payment was not
	// verified in time (or was refused by the processor); the request did
	// not run. It follows notifications/payment_rejected.
	CodePaymentRejected = -32014
	// CodePaidResultLost answers a replay of a paid request whose answer
	// the server no longer has: it crashed or closed while the call ran.
	// The payment stands; the call may or may not have taken effect.
	CodePaidResultLost = -32015
	// CodePriceRefused answers a priced request the server will not serve
	// at any price (its pricer refused it), or could not price within the
	// price it announced. Nothing was charged.
	CodePriceRefused = -32016
	// CodePaymentDeclined is the client's own answer to a call it did not
	// pay for: no per-call cap, a price over the cap or a budget, a unit
	// the budget does not hold, a server not allowed to charge, no
	// handler for the payment method, the person declining, or the wallet
	// failing. data.reason says which.
	CodePaymentDeclined = -32017
	// CodePaymentRequired is CEP-8's explicit-gating "Payment Required",
	// with data.payment_options. MCP 2025-11-25 gives -32042 to
	// URLElicitationRequired, with data.elicitations instead: tell them
	// apart by the data (IsPaymentRequired).
	CodePaymentRequired = -32042
	// CodePaymentPending is CEP-8's "Payment Pending": the payment for
	// this request is not verified yet; retry after data.retry_after
	// seconds.
	CodePaymentPending = -32043
)

// retryAfterData is the data of a CodeServerBusy error that says when to
// retry, in the shape MCPx's rate_limited errors use.
type retryAfterData struct {
	RetryAfterMS int64 `json:"retry_after_ms"`
}

// BusyError is a CodeServerBusy error that asks the client to retry after
// wait (rounded up to a millisecond): {"retry_after_ms": N} as its data.
func BusyError(message string, wait time.Duration) *jsonrpc.Error {
	ms := max((wait+time.Millisecond-1)/time.Millisecond, 1)
	data, _ := json.Marshal(retryAfterData{RetryAfterMS: int64(ms)})
	return &jsonrpc.Error{Code: CodeServerBusy, Message: message, Data: data}
}

// RetryAfter reports when the server that answered err asked to be tried
// again: err is, or wraps, a CodeServerBusy *jsonrpc.Error whose data
// holds retry_after_ms.
func RetryAfter(err error) (time.Duration, bool) {
	return retryAfter(err, CodeServerBusy)
}

// retryAfter reads the retry_after_ms of err, when err is, or wraps, a
// *jsonrpc.Error with one of codes.
func retryAfter(err error, codes ...int64) (time.Duration, bool) {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || !slices.Contains(codes, werr.Code) {
		return 0, false
	}
	var d retryAfterData
	if json.Unmarshal(werr.Data, &d) != nil || d.RetryAfterMS <= 0 {
		return 0, false
	}
	return time.Duration(d.RetryAfterMS) * time.Millisecond, true
}
