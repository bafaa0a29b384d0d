package nwc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"fiatjaf.com/nostr"
)

// Event kinds of NIP-47.
const (
	KindInfo                nostr.Kind = 13194
	KindRequest             nostr.Kind = 23194
	KindResponse            nostr.Kind = 23195
	KindNotificationNIP04   nostr.Kind = 23196
	KindNotificationNIP44   nostr.Kind = 23197
	EncryptionNIP44         string     = "nip44_v2"
	EncryptionNIP04         string     = "nip04"
	NotificationReceived    string     = "payment_received"
	NotificationSent        string     = "payment_sent"
	maxMessageBytes                    = 64 << 10
	transactionStatePending            = "pending"
	transactionStateSettled            = "settled"
	transactionStateExpired            = "expired"
	transactionTypeIncoming            = "incoming"
	transactionTypeOutgoing            = "outgoing"
)

// Methods of NIP-47 that the Client uses and the Service serves: an info
// event lists those a connection may use (Capabilities.Methods).
const (
	MethodPayInvoice    = "pay_invoice"
	MethodMakeInvoice   = "make_invoice"
	MethodLookupInvoice = "lookup_invoice"
	MethodGetBalance    = "get_balance"
	MethodGetInfo       = "get_info"
)

// Request is the decrypted content of a kind 23194 event.
type Request struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Response is the decrypted content of a kind 23195 event.
type Response struct {
	ResultType string          `json:"result_type"`
	Error      *ErrorBody      `json:"error,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// ErrorBody is a NIP-47 error.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Notification is the decrypted content of a kind 23196 or 23197 event.
type Notification struct {
	Type         string      `json:"notification_type"`
	Notification Transaction `json:"notification"`
}

// Transaction is NIP-47's description of a payment. Amounts in msat,
// times in Unix seconds.
type Transaction struct {
	Type            string `json:"type"`
	State           string `json:"state,omitempty"`
	Invoice         string `json:"invoice,omitempty"`
	Description     string `json:"description,omitempty"`
	DescriptionHash string `json:"description_hash,omitempty"`
	Preimage        string `json:"preimage,omitempty"`
	PaymentHash     string `json:"payment_hash"`
	Amount          int64  `json:"amount"`
	FeesPaid        int64  `json:"fees_paid"`
	CreatedAt       int64  `json:"created_at"`
	ExpiresAt       int64  `json:"expires_at,omitempty"`
	SettledAt       int64  `json:"settled_at,omitempty"`
}

// Info is the result of get_info.
type Info struct {
	Alias         string   `json:"alias"`
	Color         string   `json:"color,omitempty"`
	Pubkey        string   `json:"pubkey"`
	Network       string   `json:"network"`
	BlockHeight   int64    `json:"block_height"`
	BlockHash     string   `json:"block_hash"`
	Methods       []string `json:"methods"`
	Notifications []string `json:"notifications,omitempty"`
}

var errNull = errors.New("null message")

// decodeObject unmarshals one JSON object, refusing anything larger than a
// wallet message, trailing data and null.
func decodeObject(b []byte, v any) error {
	if len(b) > maxMessageBytes {
		return fmt.Errorf("message of %d bytes is larger than %d", len(b), maxMessageBytes)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		if bytes.Equal(b, []byte("null")) {
			return errNull
		}
		return errors.New("message is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the message")
	}
	return nil
}

func isObjectOrNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || raw[0] == '{' || bytes.Equal(raw, []byte("null"))
}

// DecodeRequest parses a request: a method and, if any, an object of
// parameters.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if err := decodeObject(b, &r); err != nil {
		return Request{}, fmt.Errorf("nwc request: %w", err)
	}
	if r.Method == "" {
		return Request{}, errors.New("nwc request: no method")
	}
	if !isObjectOrNull(r.Params) {
		return Request{}, errors.New("nwc request: params is not an object")
	}
	return r, nil
}

// DecodeResponse parses a response: a result type and either an error
// with a code or a result object.
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	if err := decodeObject(b, &r); err != nil {
		return Response{}, fmt.Errorf("nwc response: %w", err)
	}
	if r.ResultType == "" {
		return Response{}, errors.New("nwc response: no result_type")
	}
	if r.Error != nil && r.Error.Code == "" {
		return Response{}, errors.New("nwc response: error without a code")
	}
	if !isObjectOrNull(r.Result) {
		return Response{}, errors.New("nwc response: result is not an object")
	}
	if r.Error == nil && (len(bytes.TrimSpace(r.Result)) == 0 || bytes.Equal(bytes.TrimSpace(r.Result), []byte("null"))) {
		return Response{}, errors.New("nwc response: neither a result nor an error")
	}
	return r, nil
}

// DecodeNotification parses a notification.
func DecodeNotification(b []byte) (Notification, error) {
	var n Notification
	if err := decodeObject(b, &n); err != nil {
		return Notification{}, fmt.Errorf("nwc notification: %w", err)
	}
	if n.Type == "" {
		return Notification{}, errors.New("nwc notification: no notification_type")
	}
	return n, nil
}
