package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cvmgo/cvm/did"
)

// MarshalJSON writes the signature as multibase base64url ('u…').
func (s Signature) MarshalJSON() ([]byte, error) {
	return json.Marshal(did.EncodeBase64URLMultibase(s))
}

// UnmarshalJSON reads a multibase signature (base64url 'u' or base58btc
// 'z').
func (s *Signature) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		return fmt.Errorf("%w: signature is not a string", ErrMalformed)
	}
	raw, err := did.DecodeMultibase(text)
	if err != nil {
		return fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	*s = raw
	return nil
}

// Sign signs r's BCS bytes with s, as the HTTP header carries a receipt.
// The receipt's fragment names the key that verifies it under s's DID:
// Fragment(s.KeyID()) for a receipt that DID resolution must check.
func Sign(ctx context.Context, s did.Signer, r SubRAV) (SignedSubRAV, error) {
	if err := r.check(); err != nil {
		return SignedSubRAV{}, err
	}
	sig, err := s.Sign(ctx, r.BCS())
	if err != nil {
		return SignedSubRAV{}, fmt.Errorf("channel: sign receipt: %w", err)
	}
	return SignedSubRAV{SubRAV: r, Signature: sig}, nil
}

// Verify checks the signature with k, the key the payer's DID document
// lists under the receipt's fragment. The error wraps did.ErrBadSignature
// or did.ErrBadKey.
func (s *SignedSubRAV) Verify(k did.PublicKey) error {
	if err := k.Verify(s.SubRAV.BCS(), s.Signature); err != nil {
		return fmt.Errorf("channel: receipt signature: %w", err)
	}
	return nil
}

// Fragment returns the fragment of a DID URL (what follows '#'), the
// vm_id_fragment of a receipt signed by that key; "" without one.
func Fragment(keyID string) string {
	_, f, ok := strings.Cut(keyID, "#")
	if !ok {
		return ""
	}
	return f
}
