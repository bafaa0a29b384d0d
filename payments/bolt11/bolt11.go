// Package bolt11 encodes and decodes Lightning invoices as BOLT 11
// specifies them: bech32 with a human-readable part "ln" + currency
// ("lnbc", "lntb", "lntbs", "lnbcrt") and an optional amount, a timestamp,
// tagged fields, and a recoverable secp256k1 signature by the payee node.
//
// Decode checks the checksum, every field it understands and the
// signature; the payee is the public key the signature recovers, or the n
// field when there is one (which the signature must then match). Fields
// it does not understand (fallback addresses, route hints, …) are skipped
// as BOLT 11 requires; Encode writes the fields of Invoice only.
//
// Files: bolt11.go (Invoice, Decode, Encode), bech32.go (the bech32
// encoding without BIP-173's length limit, which invoices exceed).
package bolt11

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/ecdsa"
)

// Currencies (the part of the prefix after "ln").
const (
	Bitcoin = "bc"
	Testnet = "tb"
	Signet  = "tbs"
	Regtest = "bcrt"
)

// DefaultExpiry applies when an invoice has no x field, and
// DefaultMinFinalCLTV when it has no c field.
const (
	DefaultExpiry       = time.Hour
	DefaultMinFinalCLTV = 18
)

// MaxAmountMsat is 21 million bitcoin: no invoice asks for more.
const MaxAmountMsat = 21_000_000 * msatPerBTC

const msatPerBTC = 100_000_000_000

// ErrInvalid is wrapped by every error Decode returns.
var ErrInvalid = errors.New("invalid BOLT11 invoice")

// Tagged field types.
const (
	tagPaymentHash     = 1
	tagRouteHint       = 3
	tagFeatures        = 5
	tagExpiry          = 6
	tagFallback        = 9
	tagDescription     = 13
	tagPaymentSecret   = 16
	tagPayee           = 19
	tagDescriptionHash = 23
	tagMinFinalCLTV    = 24
)

// knownFeatures are the even (compulsory) feature bits an invoice may set
// that this package understands (BOLT 9, context 9): var_onion_optin,
// payment_secret, basic_mpp, option_payment_metadata. An unknown even bit
// fails the decode; unknown odd bits are kept and ignored.
var knownFeatures = map[int]bool{8: true, 14: true, 16: true, 48: true}

// Invoice is a decoded BOLT 11 invoice.
type Invoice struct {
	// Currency is the chain: Bitcoin, Testnet, Signet or Regtest.
	Currency string
	// Amount is what the invoice asks for, in millisatoshis; zero when it
	// leaves the amount to the payer.
	Amount int64
	// Timestamp is when the invoice was made (second precision).
	Timestamp time.Time
	// Hash is the payment hash, sha256 of the preimage (field p).
	Hash [32]byte
	// Secret is the payment secret (field s), if any.
	Secret *[32]byte
	// Description is the purpose of the payment (field d), and
	// DescriptionHash its sha256 when it is too long to include (field h).
	// Encode writes d unless there is an h and Description is empty.
	Description     string
	DescriptionHash *[32]byte
	// ExpirySeconds is the x field; zero means it is absent and the
	// invoice expires DefaultExpiry after Timestamp.
	ExpirySeconds uint64
	// MinFinalCLTV is the c field; zero means absent (the payer uses
	// DefaultMinFinalCLTV).
	MinFinalCLTV uint64
	// Features are the feature bits set (field 9), ascending.
	Features []int
	// NodeID is the payee's compressed public key: recovered from the
	// signature, or the n field when ExplicitPayee. Encode ignores it and
	// uses the signing key's.
	NodeID [33]byte
	// ExplicitPayee says whether the invoice carries the payee in an n
	// field.
	ExplicitPayee bool
}

// AmountMsat returns the amount in millisatoshis, zero when there is none.
func (inv *Invoice) AmountMsat() int64 { return inv.Amount }

// PaymentHash returns the payment hash, hex.
func (inv *Invoice) PaymentHash() string { return hex.EncodeToString(inv.Hash[:]) }

// Expiry returns how long after Timestamp the invoice may be paid.
func (inv *Invoice) Expiry() time.Duration {
	if inv.ExpirySeconds == 0 {
		return DefaultExpiry
	}
	if inv.ExpirySeconds > uint64(1<<63-1)/uint64(time.Second) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(inv.ExpirySeconds) * time.Second
}

// ExpiresAt returns when the invoice expires.
func (inv *Invoice) ExpiresAt() time.Time { return inv.Timestamp.Add(inv.Expiry()) }

// Expired reports whether the invoice has expired at now.
func (inv *Invoice) Expired(now time.Time) bool { return !now.Before(inv.ExpiresAt()) }

// Payee returns the payee node's public key, hex (66 characters).
func (inv *Invoice) Payee() string { return hex.EncodeToString(inv.NodeID[:]) }

// Encode signs inv with key and returns the invoice string, lower case.
// The timestamp is truncated to the second.
func Encode(inv Invoice, key *btcec.PrivateKey) (string, error) {
	switch inv.Currency {
	case Bitcoin, Testnet, Signet, Regtest:
	default:
		return "", fmt.Errorf("bolt11: unknown currency %q", inv.Currency)
	}
	if inv.Amount < 0 || inv.Amount > MaxAmountMsat {
		return "", fmt.Errorf("bolt11: amount %d msat is out of range", inv.Amount)
	}
	ts := inv.Timestamp.Unix()
	if ts < 0 || ts >= 1<<35 {
		return "", fmt.Errorf("bolt11: timestamp %v does not fit in 35 bits", inv.Timestamp)
	}
	if !utf8.ValidString(inv.Description) {
		return "", errors.New("bolt11: description is not valid UTF-8")
	}
	hrp := "ln" + inv.Currency + encodeAmount(inv.Amount)

	data := make([]byte, 0, 256)
	data = appendUint(data, uint64(ts), 7)
	data = appendBytesField(data, tagPaymentHash, inv.Hash[:])
	if inv.Secret != nil {
		data = appendBytesField(data, tagPaymentSecret, inv.Secret[:])
	}
	if inv.Description != "" || inv.DescriptionHash == nil {
		if len(inv.Description) > 639 {
			return "", fmt.Errorf("bolt11: description of %d bytes is longer than a field holds (639); use DescriptionHash", len(inv.Description))
		}
		data = appendBytesField(data, tagDescription, []byte(inv.Description))
	}
	if inv.DescriptionHash != nil {
		data = appendBytesField(data, tagDescriptionHash, inv.DescriptionHash[:])
	}
	if inv.ExpirySeconds != 0 {
		data = appendUintField(data, tagExpiry, inv.ExpirySeconds)
	}
	if inv.MinFinalCLTV != 0 {
		data = appendUintField(data, tagMinFinalCLTV, inv.MinFinalCLTV)
	}
	if len(inv.Features) > 0 {
		words, err := featureWords(inv.Features)
		if err != nil {
			return "", err
		}
		data = appendField(data, tagFeatures, words)
	}
	if inv.ExplicitPayee {
		data = appendBytesField(data, tagPayee, key.PubKey().SerializeCompressed())
	}

	hash := signingHash(hrp, data)
	compact := ecdsa.SignCompact(key, hash[:], true)
	// compact is header (27 + 4 + recid), r, s; BOLT 11 wants r, s, recid.
	sig := make([]byte, 65)
	copy(sig, compact[1:])
	sig[64] = compact[0] - 31
	words, _ := convertBits(sig, 8, 5, true)
	data = append(data, words...)
	return bech32Encode(hrp, data), nil
}

// Decode parses and verifies an invoice. The "lightning:" URI prefix is
// accepted. Expiry is not checked: see Invoice.Expired.
func Decode(s string) (*Invoice, error) {
	inv, err := decode(s, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return inv, nil
}

// Parse is Decode without the signature's check: every field is read and
// checked as Decode does, the signature's form too, but the payee's key
// is not recovered from it (half a millisecond in pure Go): NodeID is the
// payee named in field n, if any, else zero. For a payer about to hand the
// invoice to its wallet, which verifies it before paying.
func Parse(s string) (*Invoice, error) {
	inv, err := decode(s, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return inv, nil
}

func decode(s string, verify bool) (*Invoice, error) {
	s = strings.TrimSpace(s)
	if len(s) > 10 && strings.EqualFold(s[:10], "lightning:") {
		s = s[10:]
	}
	if len(s) > 7089 { // the most a QR code holds: longer is not an invoice
		return nil, fmt.Errorf("%d characters is too long", len(s))
	}
	hrp, data, err := bech32Decode(s)
	if err != nil {
		return nil, err
	}
	inv := &Invoice{}
	if err := parseHRP(hrp, inv); err != nil {
		return nil, err
	}
	const sigWords = 104 // 520 bits: r, s and the recovery id
	if len(data) < 7+sigWords {
		return nil, fmt.Errorf("data part of %d characters is too short for a timestamp and a signature", len(data))
	}
	signed, sigData := data[:len(data)-sigWords], data[len(data)-sigWords:]
	inv.Timestamp = time.Unix(int64(readUint(signed[:7])), 0)

	var payee []byte
	havePayment, haveDescription, haveHash, haveSecret, haveExpiry, haveCLTV, haveFeatures := false, false, false, false, false, false, false
	fields := signed[7:]
	for len(fields) > 0 {
		if len(fields) < 3 {
			return nil, errors.New("truncated tagged field")
		}
		typ := int(fields[0])
		n := int(fields[1])<<5 | int(fields[2])
		if len(fields) < 3+n {
			return nil, fmt.Errorf("tagged field %d claims %d characters, %d are left", typ, n, len(fields)-3)
		}
		body := fields[3 : 3+n]
		fields = fields[3+n:]
		switch typ {
		case tagPaymentHash:
			if n != 52 || havePayment {
				continue // a variant of another length, or not the first
			}
			if err := readBytes32(body, &inv.Hash); err != nil {
				return nil, fmt.Errorf("payment hash: %w", err)
			}
			havePayment = true
		case tagPaymentSecret:
			if n != 52 || haveSecret {
				continue
			}
			var sec [32]byte
			if err := readBytes32(body, &sec); err != nil {
				return nil, fmt.Errorf("payment secret: %w", err)
			}
			inv.Secret, haveSecret = &sec, true
		case tagDescriptionHash:
			if n != 52 || haveHash {
				continue
			}
			var h [32]byte
			if err := readBytes32(body, &h); err != nil {
				return nil, fmt.Errorf("description hash: %w", err)
			}
			inv.DescriptionHash, haveHash = &h, true
		case tagDescription:
			if haveDescription {
				continue
			}
			b, err := convertBits(body, 5, 8, false)
			if err != nil {
				return nil, fmt.Errorf("description: %w", err)
			}
			if !utf8.Valid(b) {
				return nil, errors.New("description is not valid UTF-8")
			}
			inv.Description, haveDescription = string(b), true
		case tagExpiry, tagMinFinalCLTV:
			if n > 12 {
				return nil, fmt.Errorf("tagged field %d: %d characters is too long for a number", typ, n)
			}
			v := readUint(body)
			if typ == tagExpiry && !haveExpiry {
				inv.ExpirySeconds, haveExpiry = v, true
			} else if typ == tagMinFinalCLTV && !haveCLTV {
				inv.MinFinalCLTV, haveCLTV = v, true
			}
		case tagFeatures:
			if haveFeatures {
				continue
			}
			haveFeatures = true
			for i := range n * 5 {
				if body[n-1-i/5]>>(uint(i)%5)&1 == 0 {
					continue
				}
				if i%2 == 0 && !knownFeatures[i] {
					return nil, fmt.Errorf("the invoice requires feature %d, which is unknown", i)
				}
				inv.Features = append(inv.Features, i)
			}
		case tagPayee:
			if n != 53 || payee != nil {
				continue
			}
			b, err := convertBits(body, 5, 8, false)
			if err != nil {
				return nil, fmt.Errorf("payee: %w", err)
			}
			if _, err := btcec.ParsePubKey(b); err != nil {
				return nil, fmt.Errorf("payee is not a public key: %w", err)
			}
			payee = b
		}
	}
	if !havePayment {
		return nil, errors.New("no payment hash (field p)")
	}

	sig, err := convertBits(sigData, 5, 8, false)
	if err != nil || len(sig) != 65 {
		return nil, errors.New("malformed signature")
	}
	recid := sig[64]
	if recid > 3 {
		return nil, fmt.Errorf("signature recovery id %d is not 0 to 3", recid)
	}
	if !verify {
		if payee != nil {
			copy(inv.NodeID[:], payee)
			inv.ExplicitPayee = true
		}
		return inv, nil
	}
	compact := make([]byte, 65)
	compact[0] = 27 + 4 + recid
	copy(compact[1:], sig[:64])
	hash := signingHash(hrp, signed)
	pub, _, err := ecdsa.RecoverCompact(compact, hash[:])
	if err != nil {
		return nil, fmt.Errorf("signature is not recoverable: %v", err)
	}
	recovered := pub.SerializeCompressed()
	if payee != nil {
		if string(payee) != string(recovered) {
			return nil, errors.New("signature is not by the payee named in field n")
		}
		inv.ExplicitPayee = true
	}
	copy(inv.NodeID[:], recovered)
	return inv, nil
}

func parseHRP(hrp string, inv *Invoice) error {
	if !strings.HasPrefix(hrp, "ln") {
		return fmt.Errorf("prefix %q does not start with \"ln\"", hrp)
	}
	rest := hrp[2:]
	// The longest currency that matches: "bcrt" before "bc", "tbs" before "tb".
	for _, c := range []string{Regtest, Signet, Bitcoin, Testnet} {
		if strings.HasPrefix(rest, c) {
			inv.Currency, rest = c, rest[len(c):]
			break
		}
	}
	if inv.Currency == "" {
		return fmt.Errorf("unknown currency in prefix %q", hrp)
	}
	if rest == "" {
		return nil
	}
	amount, err := parseAmount(rest)
	if err != nil {
		return err
	}
	inv.Amount = amount
	return nil
}

func parseAmount(s string) (int64, error) {
	digits, mult := s, byte(0)
	if last := s[len(s)-1]; last < '0' || last > '9' {
		digits, mult = s[:len(s)-1], last
	}
	if digits == "" {
		return 0, fmt.Errorf("amount %q has no digits", s)
	}
	if digits[0] == '0' {
		return 0, fmt.Errorf("amount %q has a leading zero", s)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("amount %q is not a number followed by m, u, n or p", s)
		}
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q is too large", s)
	}
	if mult == 'p' {
		if v%10 != 0 {
			return 0, fmt.Errorf("amount %q is not a whole number of millisatoshis", s)
		}
		if v/10 > uint64(MaxAmountMsat) {
			return 0, fmt.Errorf("amount %q is more than 21 million bitcoin", s)
		}
		return int64(v / 10), nil
	}
	// In msat: a bitcoin is 1e11, m 1e8, u 1e5, n 1e2.
	per := map[byte]uint64{0: msatPerBTC, 'm': 100_000_000, 'u': 100_000, 'n': 100}[mult]
	if per == 0 {
		return 0, fmt.Errorf("amount %q has an unknown multiplier %q", s, mult)
	}
	if v > uint64(MaxAmountMsat)/per {
		return 0, fmt.Errorf("amount %q is more than 21 million bitcoin", s)
	}
	return int64(v * per), nil
}

// encodeAmount writes msat with the largest multiplier that represents it
// exactly; zero is no amount.
func encodeAmount(msat int64) string {
	if msat == 0 {
		return ""
	}
	for _, u := range []struct {
		per  int64
		mult string
	}{{msatPerBTC, ""}, {100_000_000, "m"}, {100_000, "u"}, {100, "n"}} {
		if msat%u.per == 0 {
			return strconv.FormatInt(msat/u.per, 10) + u.mult
		}
	}
	return strconv.FormatInt(msat, 10) + "0p"
}

func signingHash(hrp string, words []byte) [32]byte {
	b, _ := convertBits(words, 5, 8, true)
	h := sha256.New()
	h.Write([]byte(hrp))
	h.Write(b)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func readUint(words []byte) uint64 {
	var v uint64
	for _, w := range words {
		v = v<<5 | uint64(w)
	}
	return v
}

func readBytes32(words []byte, dst *[32]byte) error {
	b, err := convertBits(words, 5, 8, false)
	if err != nil {
		return err
	}
	if len(b) != 32 {
		return fmt.Errorf("%d bytes, want 32", len(b))
	}
	copy(dst[:], b)
	return nil
}

func appendUint(data []byte, v uint64, words int) []byte {
	for i := words - 1; i >= 0; i-- {
		data = append(data, byte(v>>(5*uint(i)))&31)
	}
	return data
}

func appendField(data []byte, typ byte, words []byte) []byte {
	data = append(data, typ, byte(len(words)>>5), byte(len(words)&31))
	return append(data, words...)
}

func appendBytesField(data []byte, typ byte, b []byte) []byte {
	words, _ := convertBits(b, 8, 5, true)
	return appendField(data, typ, words)
}

// appendUintField writes v in the fewest 5-bit words.
func appendUintField(data []byte, typ byte, v uint64) []byte {
	n := 0
	for x := v; x > 0; x >>= 5 {
		n++
	}
	return appendField(data, typ, appendUint(nil, v, n))
}

func featureWords(bits []int) ([]byte, error) {
	sorted := slices.Clone(bits)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if sorted[0] < 0 || sorted[len(sorted)-1]/5 >= 1023 {
		return nil, fmt.Errorf("bolt11: feature bit out of range")
	}
	n := sorted[len(sorted)-1]/5 + 1
	words := make([]byte, n)
	for _, b := range sorted {
		words[n-1-b/5] |= 1 << (uint(b) % 5)
	}
	return words, nil
}
