package channel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// AppendJSON appends NIP-4's JSON transport encoding of r: every integer a
// decimal string, the id 0x-hex, fields in NIP-4's order:
//
//	{"version":"1","chainId":"0","channelId":"0x…","channelEpoch":"0",
//	 "vmIdFragment":"nostr","accumulatedAmount":"21000","nonce":"1"}
//
// The fragment needs no escaping (see SubRAV.check), which keeps the bytes
// those of JavaScript's JSON.stringify.
func (r *SubRAV) AppendJSON(b []byte) []byte {
	b = append(b, `{"version":"`...)
	b = strconv.AppendUint(b, uint64(r.Version), 10)
	b = append(b, `","chainId":"`...)
	b = strconv.AppendUint(b, r.ChainID, 10)
	b = append(b, `","channelId":"0x`...)
	b = appendHex(b, r.ChannelID[:])
	b = append(b, `","channelEpoch":"`...)
	b = strconv.AppendUint(b, r.ChannelEpoch, 10)
	b = append(b, `","vmIdFragment":"`...)
	b = append(b, r.VMIDFragment...)
	b = append(b, `","accumulatedAmount":"`...)
	b = strconv.AppendUint(b, r.AccumulatedAmount, 10)
	b = append(b, `","nonce":"`...)
	b = strconv.AppendUint(b, r.Nonce, 10)
	return append(b, `"}`...)
}

func appendHex(b, src []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range src {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

// MarshalJSON is AppendJSON, for a receipt that cannot be encoded an error.
func (r SubRAV) MarshalJSON() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return r.AppendJSON(nil), nil
}

// subRAVJSON is the JSON transport encoding as it is read.
type subRAVJSON struct {
	Version           string `json:"version"`
	ChainID           string `json:"chainId"`
	ChannelID         string `json:"channelId"`
	ChannelEpoch      string `json:"channelEpoch"`
	VMIDFragment      string `json:"vmIdFragment"`
	AccumulatedAmount string `json:"accumulatedAmount"`
	Nonce             string `json:"nonce"`
}

// UnmarshalJSON reads the JSON transport encoding. Every field is required;
// integers are canonical decimal strings (no sign, no leading zero).
func (r *SubRAV) UnmarshalJSON(b []byte) error {
	var j subRAVJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%w: SubRAV JSON: %v", ErrMalformed, err)
	}
	v, err := parseDecimal("version", j.Version)
	if err != nil {
		return err
	}
	if v > 255 {
		return fmt.Errorf("%w: SubRAV version %d", ErrMalformed, v)
	}
	var out SubRAV
	out.Version = uint8(v)
	if out.ChainID, err = parseDecimal("chainId", j.ChainID); err != nil {
		return err
	}
	if out.ChannelID, err = ParseID(j.ChannelID); err != nil {
		return err
	}
	if out.ChannelEpoch, err = parseDecimal("channelEpoch", j.ChannelEpoch); err != nil {
		return err
	}
	out.VMIDFragment = j.VMIDFragment
	if out.AccumulatedAmount, err = parseDecimal("accumulatedAmount", j.AccumulatedAmount); err != nil {
		return err
	}
	if out.Nonce, err = parseDecimal("nonce", j.Nonce); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	*r = out
	return nil
}

// parseDecimal reads a canonical unsigned decimal that fits 64 bits.
func parseDecimal(field, s string) (uint64, error) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: %s %.40q is not a canonical decimal", ErrMalformed, field, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %s %.40q is not a canonical decimal", ErrMalformed, field, s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s is beyond 64 bits", ErrMalformed, field, s)
	}
	return n, nil
}

// Amount is a non-negative integer written as a decimal string in JSON, as
// NIP-4's amounts (maxAmount, cost, costUsd) are.
type Amount uint64

// MarshalJSON writes the decimal string.
func (a Amount) MarshalJSON() ([]byte, error) {
	b := append([]byte{'"'}, strconv.AppendUint(nil, uint64(a), 10)...)
	return append(b, '"'), nil
}

// UnmarshalJSON reads a canonical decimal string.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: amount %.40s is not a decimal string", ErrMalformed, b)
	}
	n, err := parseDecimal("amount", s)
	if err != nil {
		return err
	}
	*a = Amount(n)
	return nil
}

// SignedSubRAV is a receipt with the payer's signature over its BCS bytes.
// Signature is raw bytes here, multibase base64url ('u…') in JSON.
type SignedSubRAV struct {
	SubRAV    SubRAV    `json:"subRav"`
	Signature Signature `json:"signature"`
}

// Signature is signature bytes, multibase base64url in JSON.
type Signature []byte

// Payload is NIP-4's payment payload, the JSON inside the
// X-Payment-Channel-Data header: a request carries SignedSubRAV, an answer
// SubRAV (cvm: the channel's state once this call is paid) and Cost, an
// error SubRAV (the channel's state) and Error. Fields are in NIP-4's order,
// the empty ones left out; Deposit is cvm's addition, the channel's deposit,
// so that a client that lost its state learns what it may still spend.
type Payload struct {
	Version      int           `json:"version"`
	ClientTxRef  string        `json:"clientTxRef,omitempty"`
	MaxAmount    Amount        `json:"maxAmount,omitempty"`
	SignedSubRAV *SignedSubRAV `json:"signedSubRav,omitempty"`
	ServiceTxRef string        `json:"serviceTxRef,omitempty"`
	SubRAV       *SubRAV       `json:"subRav,omitempty"`
	Cost         Amount        `json:"cost,omitempty"`
	CostUSD      Amount        `json:"costUsd,omitempty"`
	Error        *PayloadError `json:"error,omitempty"`
	Deposit      Amount        `json:"deposit,omitempty"`
}

// PayloadError is the error of a payload: one of the Code values and a
// message for people.
type PayloadError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// MarshalPayload encodes p as NIP-4 does: HTML characters unescaped, as
// JavaScript's JSON.stringify leaves them.
func MarshalPayload(p *Payload) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// UnmarshalPayload decodes a payload; its version must be 1. Fields it does
// not know are ignored, as NIP-4 may add some.
func UnmarshalPayload(b []byte) (Payload, error) {
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		return Payload{}, fmt.Errorf("%w: payment channel payload: %v", ErrMalformed, err)
	}
	if p.Version != Version {
		return Payload{}, fmt.Errorf("%w: payment channel payload version %d, want %d", ErrMalformed, p.Version, Version)
	}
	if s := p.SignedSubRAV; s != nil {
		// A signedSubRav without its subRav never reached SubRAV's decoder.
		if err := s.SubRAV.check(); err != nil {
			return Payload{}, fmt.Errorf("signedSubRav: %w", err)
		}
		if len(s.Signature) == 0 {
			return Payload{}, fmt.Errorf("%w: signedSubRav without a signature", ErrMalformed)
		}
	}
	return p, nil
}
