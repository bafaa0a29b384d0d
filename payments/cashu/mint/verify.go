package mint

import (
	"encoding/json"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/payments/cashu"
)

// CodeMalformed is the code of a request that no NUT error code fits
// (malformed JSON, a point that is not one, a body too large). Not in
// the NUTs' table: wallets read it as a generic mint error.
const CodeMalformed cashu.ErrorCode = 0

// maxSecretLen bounds a proof's secret: NUT-00's are 64 hex digits, and
// NUT-10 secrets (which this mint refuses) a few hundred bytes.
const maxSecretLen = 1024

// input is a verified input: its proof and secret point Y.
type input struct {
	proof cashu.Proof
	y     []byte // compressed Y
}

// checkInputs verifies proofs to spend: each of a known keyset and amount,
// no secret twice, each signature the mint's own (C = kY). It returns the
// inputs, their sum and the input fee.
func (m *Mint) checkInputs(proofs []cashu.Proof) (in []input, sum, fee uint64, err error) {
	if len(proofs) == 0 {
		return nil, 0, 0, cashu.Errorf(CodeMalformed, "no inputs")
	}
	if len(proofs) > m.opts.MaxProofs {
		return nil, 0, 0, cashu.Errorf(cashu.CodeMaxInputsExceeded, "%d inputs, at most %d", len(proofs), m.opts.MaxProofs)
	}
	seen := make(map[string]bool, len(proofs))
	for i, p := range proofs {
		if p.ID != m.ks.pub.ID {
			return nil, 0, 0, cashu.Errorf(cashu.CodeKeysetUnknown, "input %d: keyset %q is not known", i, p.ID)
		}
		k, ok := m.ks.priv[p.Amount]
		if !ok {
			return nil, 0, 0, cashu.Errorf(cashu.CodeProofVerificationFailed, "input %d: the keyset has no amount %d", i, p.Amount)
		}
		if len(p.Secret) == 0 || len(p.Secret) > maxSecretLen {
			return nil, 0, 0, cashu.Errorf(cashu.CodeProofVerificationFailed, "input %d: secret of %d bytes", i, len(p.Secret))
		}
		if isNUT10(p.Secret) {
			// Honouring a lock means verifying its witness; a mint that
			// does not must not let anyone spend a locked proof.
			return nil, 0, 0, cashu.Errorf(cashu.CodeProofVerificationFailed, "input %d: spending conditions (NUT-10) are not supported", i)
		}
		c, err := cashu.ParsePoint(p.C)
		if err != nil {
			return nil, 0, 0, cashu.Errorf(cashu.CodeProofVerificationFailed, "input %d: C is not a compressed point", i)
		}
		y, err := cashu.SecretPoint(p.Secret)
		if err != nil {
			return nil, 0, 0, cashu.Errorf(cashu.CodeProofVerificationFailed, "input %d: %v", i, err)
		}
		yb := y.SerializeCompressed()
		if seen[string(yb)] {
			return nil, 0, 0, cashu.Errorf(cashu.CodeDuplicateInputs, "input %d repeats an earlier one", i)
		}
		seen[string(yb)] = true
		if !verify(k, y, c) {
			return nil, 0, 0, cashu.Errorf(cashu.CodeProofVerificationFailed, "input %d: signature does not verify", i)
		}
		in = append(in, input{proof: p, y: yb})
	}
	sum, ok := cashu.SumProofs(proofs)
	if !ok {
		return nil, 0, 0, cashu.Errorf(cashu.CodeUnbalanced, "inputs overflow")
	}
	fee, err = cashu.InputFees(proofs, func(string) (uint64, bool) { return m.ks.pub.InputFeePPK, true })
	if err != nil {
		return nil, 0, 0, cashu.Errorf(cashu.CodeUnbalanced, "input fees overflow")
	}
	return in, sum, fee, nil
}

// verify reports whether C = kY.
func verify(k *btcec.PrivateKey, y, c *btcec.PublicKey) bool {
	var yj, ky btcec.JacobianPoint
	y.AsJacobian(&yj)
	btcec.ScalarMultNonConst(&k.Key, &yj, &ky)
	ky.ToAffine()
	return btcec.NewPublicKey(&ky.X, &ky.Y).IsEqual(c)
}

// isNUT10 reports whether a secret is a NUT-10 well-known secret, a JSON
// array ["KIND", {...}].
func isNUT10(secret string) bool {
	if !strings.HasPrefix(strings.TrimSpace(secret), "[") {
		return false
	}
	var v []json.RawMessage
	return json.Unmarshal([]byte(secret), &v) == nil && len(v) == 2
}

// output is a checked output: its message and its B_ point.
type output struct {
	msg   cashu.BlindedMessage
	point *btcec.PublicKey
	b     []byte // compressed B_
}

// checkOutputs checks blinded messages to sign: of the active keyset, an
// amount it signs (unless blank, NUT-08 change, whose amount the mint
// sets), each B_ a point, none twice. It returns them and their sum.
func (m *Mint) checkOutputs(msgs []cashu.BlindedMessage, blank bool) ([]output, uint64, error) {
	if len(msgs) > m.opts.MaxProofs {
		return nil, 0, cashu.Errorf(cashu.CodeMaxOutputsExceeded, "%d outputs, at most %d", len(msgs), m.opts.MaxProofs)
	}
	outs := make([]output, 0, len(msgs))
	seen := make(map[string]bool, len(msgs))
	for i, o := range msgs {
		if o.ID != m.ks.pub.ID {
			return nil, 0, cashu.Errorf(cashu.CodeKeysetUnknown, "output %d: keyset %q is not known", i, o.ID)
		}
		if _, ok := m.ks.priv[o.Amount]; !ok && !blank {
			return nil, 0, cashu.Errorf(CodeMalformed, "output %d: the keyset has no amount %d", i, o.Amount)
		}
		b, err := cashu.ParsePoint(o.B)
		if err != nil {
			return nil, 0, cashu.Errorf(CodeMalformed, "output %d: B_ is not a compressed point", i)
		}
		bb := b.SerializeCompressed()
		if seen[string(bb)] {
			return nil, 0, cashu.Errorf(cashu.CodeDuplicateOutputs, "output %d repeats an earlier one", i)
		}
		seen[string(bb)] = true
		outs = append(outs, output{msg: o, point: b, b: bb})
	}
	sum, ok := cashu.SumOutputs(msgs)
	if !ok && !blank {
		return nil, 0, cashu.Errorf(cashu.CodeUnbalanced, "outputs overflow")
	}
	return outs, sum, nil
}

// sign signs checked outputs, with a DLEQ proof each.
func (m *Mint) sign(outs []output) ([]cashu.BlindSignature, error) {
	sigs := make([]cashu.BlindSignature, len(outs))
	for i, o := range outs {
		key := cashu.SigningKey{Priv: m.ks.priv[o.msg.Amount], Pub: m.ks.pub.Keys[o.msg.Amount]}
		s, err := key.Sign(o.msg, o.point)
		if err != nil {
			return nil, internal("signing", err)
		}
		sigs[i] = s
	}
	return sigs, nil
}

// claims is the claim keys of inputs (spent) and outputs (signed).
func claims(in []input, outs []output) []claimKey {
	keys := make([]claimKey, 0, len(in)+len(outs))
	for _, i := range in {
		keys = append(keys, claimKey{spaceSpent, i.y})
	}
	for _, o := range outs {
		keys = append(keys, claimKey{spaceSigned, o.b})
	}
	return keys
}
