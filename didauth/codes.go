package didauth

import (
	"fmt"
	"net/http"
)

// Codes of the JSON body {"code","message"} the Middleware answers with.
// They are stable: clients may branch on them. docs/error-codes.md lists
// them with their HTTP statuses.
const (
	// 401: the request did not authenticate.
	CodeMissing           = "auth_missing"                 // no Authorization header where one is required
	CodeMalformed         = "auth_malformed"               // not DIDAuthV1, not JSON, fields missing or of the wrong type
	CodeEncoding          = "auth_bad_encoding"            // credentials or signature not multibase base64url ('u', no padding)
	CodeUnsupportedMethod = "auth_did_method_unsupported"  // the signer's DID method is not resolved here
	CodeUnresolvable      = "auth_did_unresolvable"        // the DID's document could not be had
	CodeKeyNotFound       = "auth_key_not_found"           // key_id is not a method of the DID's document
	CodeKeyNotAuthorized  = "auth_key_not_authentication"  // key_id is in the document but not authorized for authentication
	CodeBadSignature      = "auth_bad_signature"           // the signature does not verify
	CodeWrongAudience     = "auth_wrong_audience"          // signed for another server
	CodeRequestMismatch   = "auth_request_mismatch"        // signed for another method, path or body
	CodeTimestamp         = "auth_timestamp_out_of_window" // stale or in the future beyond Window
	CodeReplayed          = "auth_nonce_replayed"          // the nonce was already used by this DID within Window
	// 403: authenticated, but the DID is not allowed.
	CodeForbidden = "auth_did_not_allowed"
	// 413: the body is larger than MaxBody, so it cannot be hashed and passed on.
	CodeBodyTooLarge = "auth_body_too_large"
	// 503: the nonce store failed or is full; nothing ran, retry later.
	CodeUnavailable = "auth_unavailable"
)

// Error is an authentication failure: the HTTP status and code the
// Middleware answers with, and a message saying what to do.
type Error struct {
	Status  int
	Code    string
	Message string
	// Err is the cause, when there is one.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("didauth: %s: %s", e.Code, e.Message) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func fail(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: code, Message: fmt.Sprintf(format, args...)}
}
