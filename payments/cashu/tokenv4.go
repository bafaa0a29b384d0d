package cashu

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// EncodeV4 encodes the token as cashuB (NUT-00 V4): CBOR with keyset ids,
// signatures and DLEQ values as bytes, proofs grouped by keyset in the
// order they first appear, base64url unpadded. Keys are written in the
// order of the NUT-00 test vectors (t, d, m, u).
func (t Token) EncodeV4() (string, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	var ids []string
	groups := map[string][]Proof{}
	for _, p := range t.Proofs {
		if _, seen := groups[p.ID]; !seen {
			ids = append(ids, p.ID)
		}
		groups[p.ID] = append(groups[p.ID], p)
	}
	var e cborEncoder
	n := 3
	if t.Memo != "" {
		n++
	}
	e.mapOf(n)
	e.key("t")
	e.array(len(ids))
	for _, id := range ids {
		idb, err := hex.DecodeString(id)
		if err != nil {
			return "", fmt.Errorf("%w: keyset id %q is not hex", ErrToken, id)
		}
		e.mapOf(2)
		e.key("i")
		e.bytes(idb)
		e.key("p")
		e.array(len(groups[id]))
		for i, p := range groups[id] {
			if err := encodeV4Proof(&e, p); err != nil {
				return "", fmt.Errorf("%w: keyset %s proof %d: %w", ErrToken, id, i, err)
			}
		}
	}
	if t.Memo != "" {
		e.key("d")
		e.text(t.Memo)
	}
	e.key("m")
	e.text(t.Mint)
	e.key("u")
	e.text(t.Unit)
	return prefixV4 + base64.RawURLEncoding.EncodeToString(e.b), nil
}

func encodeV4Proof(e *cborEncoder, p Proof) error {
	c, err := hex.DecodeString(p.C)
	if err != nil {
		return fmt.Errorf("signature is not hex")
	}
	n := 3
	var dleq [3][]byte
	if p.DLEQ != nil {
		n++
		for i, h := range []string{p.DLEQ.E, p.DLEQ.S, p.DLEQ.R} {
			if dleq[i], err = hex.DecodeString(h); err != nil {
				return fmt.Errorf("DLEQ value is not hex")
			}
		}
		if len(dleq[2]) == 0 {
			// A V4 proof's DLEQ must carry r, or no receiver can check it.
			return fmt.Errorf("DLEQ has no blinding factor")
		}
	}
	if p.Witness != "" {
		n++
	}
	e.mapOf(n)
	e.key("a")
	e.uint(p.Amount)
	e.key("s")
	e.text(p.Secret)
	e.key("c")
	e.bytes(c)
	if p.DLEQ != nil {
		e.key("d")
		e.mapOf(3)
		for i, k := range []string{"e", "s", "r"} {
			e.key(k)
			e.bytes(dleq[i])
		}
	}
	if p.Witness != "" {
		e.key("w")
		e.text(p.Witness)
	}
	return nil
}

func decodeV4(s string) (Token, error) {
	raw, err := decodeBase64(s)
	if err != nil {
		return Token{}, fmt.Errorf("%w: cashuB payload is not base64", ErrToken)
	}
	v, err := decodeCBOR(raw)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	top, err := asFields(v, "token")
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	t, err := v4Fields(top)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	return t, nil
}

func v4Fields(top fields) (Token, error) {
	var t Token
	var err error
	if t.Mint, err = top.text("m", true); err != nil {
		return t, err
	}
	if t.Unit, err = top.text("u", true); err != nil {
		return t, err
	}
	if t.Memo, err = top.text("d", false); err != nil {
		return t, err
	}
	entries, err := top.array("t", true)
	if err != nil {
		return t, err
	}
	for i, ev := range entries {
		entry, err := asFields(ev, fmt.Sprintf("t[%d]", i))
		if err != nil {
			return t, err
		}
		id, err := entry.byteString("i", true)
		if err != nil {
			return t, fmt.Errorf("t[%d]: %w", i, err)
		}
		proofs, err := entry.array("p", true)
		if err != nil {
			return t, fmt.Errorf("t[%d]: %w", i, err)
		}
		for j, pv := range proofs {
			p, err := v4Proof(pv, hex.EncodeToString(id))
			if err != nil {
				return t, fmt.Errorf("t[%d].p[%d]: %w", i, j, err)
			}
			t.Proofs = append(t.Proofs, p)
		}
	}
	return t, nil
}

func v4Proof(v any, id string) (Proof, error) {
	f, err := asFields(v, "proof")
	if err != nil {
		return Proof{}, err
	}
	p := Proof{ID: id}
	if p.Amount, err = f.uint("a", true); err != nil {
		return p, err
	}
	if p.Secret, err = f.text("s", true); err != nil {
		return p, err
	}
	c, err := f.byteString("c", true)
	if err != nil {
		return p, err
	}
	p.C = hex.EncodeToString(c)
	if p.Witness, err = f.text("w", false); err != nil {
		return p, err
	}
	if f.get("d") == nil {
		return p, nil
	}
	d, err := asFields(f.get("d"), "d")
	if err != nil {
		return p, err
	}
	var vals [3][]byte
	for i, k := range []string{"e", "s", "r"} {
		if vals[i], err = d.byteString(k, true); err != nil {
			return p, fmt.Errorf("d: %w", err)
		}
	}
	p.DLEQ = &DLEQ{E: hex.EncodeToString(vals[0]), S: hex.EncodeToString(vals[1]), R: hex.EncodeToString(vals[2])}
	return p, nil
}
