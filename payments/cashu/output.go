package cashu

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
)

// Output is a wallet's record of one output it asks the mint to sign:
// the message it sends, and the secret and blinding factor that turn the
// mint's signature into a Proof. It is secret until spent.
type Output struct {
	Message BlindedMessage
	Secret  string
	R       *btcec.PrivateKey
}

// NewOutput blinds a given secret with a given factor (NUT-00); wallets
// that derive both deterministically, and tests, use it directly.
func NewOutput(keysetID string, amount uint64, secret string, r *btcec.PrivateKey) (Output, error) {
	b, err := Blind(secret, r)
	if err != nil {
		return Output{}, err
	}
	return Output{
		Message: BlindedMessage{Amount: amount, ID: keysetID, B: PointHex(b)},
		Secret:  secret,
		R:       r,
	}, nil
}

// NewOutputs makes one output per amount with a random secret (32 bytes,
// hex, as NUT-00 recommends) and a random blinding factor.
func NewOutputs(keysetID string, amounts []uint64) ([]Output, error) {
	out := make([]Output, 0, len(amounts))
	for _, a := range amounts {
		var raw [32]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return nil, err
		}
		r, err := btcec.NewPrivateKey()
		if err != nil {
			return nil, err
		}
		o, err := NewOutput(keysetID, a, hex.EncodeToString(raw[:]), r)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Messages is the outputs' blinded messages, to send to the mint.
func Messages(outputs []Output) []BlindedMessage {
	out := make([]BlindedMessage, len(outputs))
	for i, o := range outputs {
		out[i] = o.Message
	}
	return out
}

// Proof unblinds the mint's signature on this output with the mint's key
// for the amount. The signature must answer this output (same keyset and
// amount) and carry a DLEQ proof that verifies (NUT-12: a wallet MUST
// check one it is given; a signature without one is refused, since a
// wallet that passes proofs on must be able to prove them).
// The Proof keeps the DLEQ with r, for whoever receives it.
func (o Output) Proof(sig BlindSignature, key *btcec.PublicKey) (Proof, error) {
	return o.proof(sig, key, nil)
}

// ProofWith is Proof with the key's table: the same proof, faster.
func (o Output) ProofWith(sig BlindSignature, key *KeyTable) (Proof, error) {
	return o.proof(sig, key.key, key)
}

func (o Output) proof(sig BlindSignature, key *btcec.PublicKey, tab *KeyTable) (Proof, error) {
	if sig.ID != o.Message.ID || sig.Amount != o.Message.Amount {
		return Proof{}, fmt.Errorf("cashu: signature of %d %s answers an output of %d %s", sig.Amount, sig.ID, o.Message.Amount, o.Message.ID)
	}
	if sig.DLEQ == nil {
		return Proof{}, fmt.Errorf("%w: signature has none", ErrDLEQ)
	}
	blinded, err := ParsePoint(o.Message.B)
	if err != nil {
		return Proof{}, err
	}
	cBlind, err := ParsePoint(sig.C)
	if err != nil {
		return Proof{}, err
	}
	e, err := parseScalarHex(sig.DLEQ.E)
	if err != nil {
		return Proof{}, err
	}
	s, err := parseScalarHex(sig.DLEQ.S)
	if err != nil {
		return Proof{}, err
	}
	c, err := verifyAndUnblind(key, tab, blinded, cBlind, o.R, e, s)
	if err != nil {
		return Proof{}, err
	}
	return Proof{
		Amount: o.Message.Amount,
		ID:     o.Message.ID,
		Secret: o.Secret,
		C:      PointHex(c),
		DLEQ:   &DLEQ{E: sig.DLEQ.E, S: sig.DLEQ.S, R: hex.EncodeToString(o.R.Serialize())},
	}, nil
}

// SignOutput is the mint's side of one output: C_ = kB_ and the NUT-12
// DLEQ proof that k is the key it publishes for the amount.
func SignOutput(k *btcec.PrivateKey, out BlindedMessage) (BlindSignature, error) {
	blinded, err := ParsePoint(out.B)
	if err != nil {
		return BlindSignature{}, err
	}
	return SigningKey{Priv: k, Pub: k.PubKey()}.Sign(out, blinded)
}

// SigningKey is a mint's key for one amount with its public key, computed
// once rather than for every signature (a base point multiplication).
type SigningKey struct {
	Priv *btcec.PrivateKey
	Pub  *btcec.PublicKey
}

// Sign is SignOutput of out, whose blinded message B_ the mint has parsed
// already.
func (k SigningKey) Sign(out BlindedMessage, blinded *btcec.PublicKey) (BlindSignature, error) {
	c, err := SignBlinded(k.Priv, blinded)
	if err != nil {
		return BlindSignature{}, err
	}
	e, s, err := proveDLEQ(k.Priv, k.Pub, blinded, c)
	if err != nil {
		return BlindSignature{}, err
	}
	return BlindSignature{
		Amount: out.Amount,
		ID:     out.ID,
		C:      PointHex(c),
		DLEQ:   &DLEQ{E: hex.EncodeToString(e[:]), S: hex.EncodeToString(s[:])},
	}, nil
}

// VerifyDLEQ checks the signature's DLEQ proof against the mint's key A
// for its amount and the blinded message B_ it answers (NUT-12, Alice).
func (s BlindSignature) VerifyDLEQ(pubA, blinded *btcec.PublicKey) error {
	if s.DLEQ == nil {
		return fmt.Errorf("%w: signature has none", ErrDLEQ)
	}
	c, err := ParsePoint(s.C)
	if err != nil {
		return err
	}
	return verifyWire(pubA, blinded, c, s.DLEQ)
}

// VerifyDLEQ checks a received proof's DLEQ proof against the mint's key A
// for its amount (NUT-12, Carol): B_ = Y + rG and C_ = C + rA are rebuilt
// from the blinding factor r the sender included.
func (p Proof) VerifyDLEQ(pubA *btcec.PublicKey) error {
	if p.DLEQ == nil || p.DLEQ.R == "" {
		return fmt.Errorf("%w: proof has none, or no blinding factor", ErrDLEQ)
	}
	rb, err := parseScalarHex(p.DLEQ.R)
	if err != nil {
		return err
	}
	var r btcec.ModNScalar
	if r.SetBytes(&rb) != 0 {
		return fmt.Errorf("%w: r is not below the curve order", ErrDLEQ)
	}
	c, err := ParsePoint(p.C)
	if err != nil {
		return err
	}
	y, err := SecretPoint(p.Secret)
	if err != nil {
		return err
	}
	blinded, err := sum(term{p: y}, term{k: &r})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDLEQ, err)
	}
	blindSig, err := sum(term{p: c}, term{k: &r, p: pubA})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDLEQ, err)
	}
	return verifyWire(pubA, blinded, blindSig, p.DLEQ)
}

func verifyWire(pubA, blinded, blindSig *btcec.PublicKey, d *DLEQ) error {
	e, err := parseScalarHex(d.E)
	if err != nil {
		return err
	}
	s, err := parseScalarHex(d.S)
	if err != nil {
		return err
	}
	return VerifyDLEQ(pubA, blinded, blindSig, e, s)
}

// Y is the hex of the proof's secret point, its key at the mint (NUT-07).
func (p Proof) Y() (string, error) {
	y, err := SecretPoint(p.Secret)
	if err != nil {
		return "", err
	}
	return PointHex(y), nil
}
