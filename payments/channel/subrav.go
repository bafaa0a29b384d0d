package channel

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// PMI is the payment method identifier cvm advertises for channels funded
// over Lightning and spent with receipts.
const PMI = "bitcoin-lightning-channel-v1"

// Version is the SubRAV version cvm writes and accepts.
const Version = 1

// ChainLightning is the chain_id of a channel funded by a Lightning payment:
// NIP-4 numbers Rooch chains from 1, so 0 names no chain at all.
const ChainLightning = 0

// FragmentNostr is the vm_id_fragment of a receipt made by a Nostr key: the
// key of did:nostr:<hex>#nostr, which the request event's signature proves.
const FragmentNostr = "nostr"

// ErrMalformed is wrapped by every decoder's error for input that is not a
// receipt, a payload or a tag of the forms this package defines.
var ErrMalformed = errors.New("channel: malformed")

// ID is a channel id: 32 bytes, written 0x + 64 lowercase hex digits in JSON.
type ID [32]byte

// NewID returns the id of the channel that the payment paymentHash funded,
// from client to server:
//
//	SHA-256( len(server) ‖ server ‖ len(client) ‖ client ‖ paymentHash )
//
// where each len is one byte and each key is its public key bytes: a Nostr
// key is its 32-byte x coordinate; a DID key its did.PublicKey bytes
// (Ed25519 32 bytes, secp256k1 33 bytes compressed). The lengths keep two
// different key pairs from hashing the same bytes.
func NewID(server, client []byte, paymentHash [32]byte) (ID, error) {
	if len(server) == 0 || len(server) > 255 || len(client) == 0 || len(client) > 255 {
		return ID{}, fmt.Errorf("channel: keys of %d and %d bytes, want 1 to 255", len(server), len(client))
	}
	h := sha256.New()
	h.Write([]byte{byte(len(server))})
	h.Write(server)
	h.Write([]byte{byte(len(client))})
	h.Write(client)
	h.Write(paymentHash[:])
	var id ID
	h.Sum(id[:0])
	return id, nil
}

// String returns 0x and the id in lowercase hex, as the JSON encoding does.
func (id ID) String() string { return "0x" + hex.EncodeToString(id[:]) }

// ParseID reads the form String writes (either case of hex digits).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2+2*len(id) || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return id, fmt.Errorf("%w: channel id %.80q is not 0x and 64 hex digits", ErrMalformed, s)
	}
	if _, err := hex.Decode(id[:], []byte(s[2:])); err != nil {
		return id, fmt.Errorf("%w: channel id: %v", ErrMalformed, err)
	}
	return id, nil
}

// SubRAV is NIP-4's receipt ("sub-channel receipt and voucher"): the payer's
// statement that it owes AccumulatedAmount in all on the channel, the
// Nonce-th such statement. cvm's amounts are millisatoshis; NIP-4's u256
// amount holds them, and amounts beyond 64 bits are refused.
type SubRAV struct {
	Version           uint8
	ChainID           uint64
	ChannelID         ID
	ChannelEpoch      uint64
	VMIDFragment      string
	AccumulatedAmount uint64
	Nonce             uint64
}

// maxFragment bounds vm_id_fragment: a DID URL fragment, short in practice.
const maxFragment = 128

// check reports whether r can be encoded: its version is known and its
// fragment is a DID URL fragment (RFC 3986), which keeps every encoding of
// it free of escapes.
func (r *SubRAV) check() error {
	if r.Version != Version {
		return fmt.Errorf("%w: SubRAV version %d, want %d", ErrMalformed, r.Version, Version)
	}
	return checkFragment(r.VMIDFragment)
}

func checkFragment(f string) error {
	if f == "" || len(f) > maxFragment {
		return fmt.Errorf("%w: vm_id_fragment of %d bytes, want 1 to %d", ErrMalformed, len(f), maxFragment)
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '!' || c == '$' || c == '\'' ||
			c == '(' || c == ')' || c == '*' || c == '+' || c == ',' || c == ';' || c == '=' ||
			c == ':' || c == '@' || c == '/' || c == '?' || c == '%':
		default:
			return fmt.Errorf("%w: vm_id_fragment %.80q: byte %q is not allowed in a DID URL fragment", ErrMalformed, f, c)
		}
	}
	return nil
}

// BCS returns the bytes a receipt's signature signs: the fields in order in
// BCS (integers little-endian, the id as Rooch's ObjectID, a vector of one
// 32-byte address, the fragment as ULEB128 length and bytes, the amount as
// a 32-byte u256). No domain separator, as NIP-4.
func (r *SubRAV) BCS() []byte {
	b := make([]byte, 0, 1+8+1+32+8+2+len(r.VMIDFragment)+32+8)
	b = append(b, r.Version)
	b = binary.LittleEndian.AppendUint64(b, r.ChainID)
	b = append(b, 1)
	b = append(b, r.ChannelID[:]...)
	b = binary.LittleEndian.AppendUint64(b, r.ChannelEpoch)
	b = binary.AppendUvarint(b, uint64(len(r.VMIDFragment)))
	b = append(b, r.VMIDFragment...)
	b = binary.LittleEndian.AppendUint64(b, r.AccumulatedAmount)
	b = append(b, make([]byte, 24)...)
	b = binary.LittleEndian.AppendUint64(b, r.Nonce)
	return b
}

// ParseBCS reads the bytes BCS writes, and nothing after them.
func ParseBCS(b []byte) (SubRAV, error) {
	var r SubRAV
	short := fmt.Errorf("%w: BCS SubRAV of %d bytes is cut short", ErrMalformed, len(b))
	if len(b) < 1+8+1+32+8 {
		return r, short
	}
	r.Version = b[0]
	r.ChainID = binary.LittleEndian.Uint64(b[1:])
	if b[9] != 1 {
		return r, fmt.Errorf("%w: BCS channel id is a vector of %d addresses, want 1", ErrMalformed, b[9])
	}
	copy(r.ChannelID[:], b[10:42])
	r.ChannelEpoch = binary.LittleEndian.Uint64(b[42:])
	b = b[50:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxFragment || uint64(len(b)-k) < n {
		return r, short
	}
	if k > 1 && b[k-1] == 0 {
		return r, fmt.Errorf("%w: BCS fragment length is not minimal ULEB128", ErrMalformed)
	}
	r.VMIDFragment = string(b[k : k+int(n)])
	b = b[k+int(n):]
	if len(b) != 32+8 {
		return r, fmt.Errorf("%w: BCS SubRAV has %d bytes after its fragment, want 40", ErrMalformed, len(b))
	}
	r.AccumulatedAmount = binary.LittleEndian.Uint64(b)
	for _, c := range b[8:32] {
		if c != 0 {
			return r, fmt.Errorf("%w: accumulated amount beyond 64 bits", ErrMalformed)
		}
	}
	r.Nonce = binary.LittleEndian.Uint64(b[32:])
	if err := r.check(); err != nil {
		return r, err
	}
	return r, nil
}
