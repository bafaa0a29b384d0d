package cashu

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrPaymentRequest reports a payment request that cannot be decoded.
var ErrPaymentRequest = errors.New("cashu: malformed payment request")

const prefixCreqA = "creqA"

// MaxPaymentRequestLen bounds an encoded payment request accepted from
// outside. A request with a few mints, transports and a lock is well under
// 2 KiB; 16 KiB leaves room and refuses a flood before decoding it.
const MaxPaymentRequestLen = 16 << 10

// PaymentRequest is a NUT-18 payment request: what a payee asks for and
// where to send it. Zero values are absent fields (an Amount of 0 is "any
// amount", as cashu-ts reads it).
type PaymentRequest struct {
	ID          string       // i: payment id, echoed in the payload
	Amount      uint64       // a
	Unit        string       // u: required with Amount
	SingleUse   bool         // s
	Mints       []string     // m: mints the payee accepts
	Description string       // d
	Transports  []Transport  // t: in order of preference; none means in-band
	NUT10       *NUT10Option // nut10: the lock the payee requires
}

// Transport is where to send the payment (NUT-18): "nostr" to an nprofile
// or "post" to a URL, with optional tags such as [["n", "17"]].
type Transport struct {
	Type   string
	Target string
	Tags   [][]string
}

// NUT10Option is the NUT-10 spending condition a payee requires.
type NUT10Option struct {
	Kind string
	Data string
	Tags [][]string
}

// Encode encodes the request as creqA: standard base64, padded, of its
// CBOR, fields in cashu-ts's order (t, i, a, u, m, d, s, nut10) and its
// absent optional tags as CBOR undefined, as cashu-ts writes them, so the
// NUT-18 test vectors come out byte for byte.
func (r PaymentRequest) Encode() (string, error) {
	if r.Amount != 0 && r.Unit == "" {
		return "", fmt.Errorf("%w: an amount needs a unit", ErrPaymentRequest)
	}
	n := 0
	for _, present := range []bool{r.Transports != nil, r.ID != "", r.Amount != 0, r.Unit != "",
		r.Mints != nil, r.Description != "", r.SingleUse, r.NUT10 != nil} {
		if present {
			n++
		}
	}
	var e cborEncoder
	e.mapOf(n)
	if r.Transports != nil {
		e.key("t")
		e.array(len(r.Transports))
		for _, t := range r.Transports {
			e.mapOf(3)
			e.key("t")
			e.text(t.Type)
			e.key("a")
			e.text(t.Target)
			e.key("g")
			encodeTags(&e, t.Tags)
		}
	}
	if r.ID != "" {
		e.key("i")
		e.text(r.ID)
	}
	if r.Amount != 0 {
		e.key("a")
		e.uint(r.Amount)
	}
	if r.Unit != "" {
		e.key("u")
		e.text(r.Unit)
	}
	if r.Mints != nil {
		e.key("m")
		e.textArray(r.Mints)
	}
	if r.Description != "" {
		e.key("d")
		e.text(r.Description)
	}
	if r.SingleUse {
		e.key("s")
		e.boolean(true)
	}
	if r.NUT10 != nil {
		e.key("nut10")
		e.mapOf(3)
		e.key("k")
		e.text(r.NUT10.Kind)
		e.key("d")
		e.text(r.NUT10.Data)
		e.key("t")
		encodeTags(&e, r.NUT10.Tags)
	}
	return prefixCreqA + base64.StdEncoding.EncodeToString(e.b), nil
}

func encodeTags(e *cborEncoder, tags [][]string) {
	if tags == nil {
		e.undefined()
		return
	}
	e.array(len(tags))
	for _, t := range tags {
		e.textArray(t)
	}
}

// DecodePaymentRequest decodes a creqA payment request. Fields it does not
// know (later NUT-18 additions such as "mp" and "sm") are ignored.
func DecodePaymentRequest(s string) (PaymentRequest, error) {
	if len(s) > MaxPaymentRequestLen {
		return PaymentRequest{}, fmt.Errorf("%w: %d characters, more than the %d accepted", ErrPaymentRequest, len(s), MaxPaymentRequestLen)
	}
	if !strings.HasPrefix(s, prefixCreqA) {
		return PaymentRequest{}, fmt.Errorf("%w: not a creqA request", ErrPaymentRequest)
	}
	raw, err := decodeBase64(s[len(prefixCreqA):])
	if err != nil {
		return PaymentRequest{}, fmt.Errorf("%w: not base64", ErrPaymentRequest)
	}
	v, err := decodeCBOR(raw)
	if err != nil {
		return PaymentRequest{}, fmt.Errorf("%w: %w", ErrPaymentRequest, err)
	}
	f, err := asFields(v, "payment request")
	if err != nil {
		return PaymentRequest{}, fmt.Errorf("%w: %w", ErrPaymentRequest, err)
	}
	r, err := requestFields(f)
	if err != nil {
		return PaymentRequest{}, fmt.Errorf("%w: %w", ErrPaymentRequest, err)
	}
	return r, nil
}

func requestFields(f fields) (PaymentRequest, error) {
	var r PaymentRequest
	var err error
	if r.ID, err = f.text("i", false); err != nil {
		return r, err
	}
	if r.Amount, err = f.uint("a", false); err != nil {
		return r, err
	}
	if r.Unit, err = f.text("u", false); err != nil {
		return r, err
	}
	if r.SingleUse, err = f.boolean("s"); err != nil {
		return r, err
	}
	if r.Mints, err = f.textArray("m"); err != nil {
		return r, err
	}
	if r.Description, err = f.text("d", false); err != nil {
		return r, err
	}
	ts, err := f.array("t", false)
	if err != nil {
		return r, err
	}
	for i, tv := range ts {
		tf, err := asFields(tv, fmt.Sprintf("t[%d]", i))
		if err != nil {
			return r, err
		}
		var t Transport
		if t.Type, err = tf.text("t", true); err != nil {
			return r, fmt.Errorf("t[%d]: %w", i, err)
		}
		if t.Target, err = tf.text("a", true); err != nil {
			return r, fmt.Errorf("t[%d]: %w", i, err)
		}
		if t.Tags, err = tf.tags("g"); err != nil {
			return r, fmt.Errorf("t[%d]: %w", i, err)
		}
		r.Transports = append(r.Transports, t)
	}
	if f.get("nut10") == nil {
		return r, nil
	}
	nf, err := asFields(f.get("nut10"), "nut10")
	if err != nil {
		return r, err
	}
	r.NUT10 = &NUT10Option{}
	if r.NUT10.Kind, err = nf.text("k", true); err != nil {
		return r, fmt.Errorf("nut10: %w", err)
	}
	if r.NUT10.Data, err = nf.text("d", true); err != nil {
		return r, fmt.Errorf("nut10: %w", err)
	}
	if r.NUT10.Tags, err = nf.tags("t"); err != nil {
		return r, fmt.Errorf("nut10: %w", err)
	}
	return r, nil
}
