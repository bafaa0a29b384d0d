package cashu

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestTokenV4_NUT00Vectors(t *testing.T) {
	var v nut00
	readVectors(t, "nut00.json", &v)
	if len(v.V4Serialized) != 2 {
		t.Fatalf("%d V4 vectors, want 2", len(v.V4Serialized))
	}
	for i, s := range v.V4Serialized {
		tok, err := DecodeToken(s)
		if err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		got, err := tok.EncodeV4()
		if err != nil {
			t.Fatal(err)
		}
		// The vectors differ in padding; the bytes must not.
		if got != strings.TrimRight(s, "=") {
			t.Errorf("vector %d re-encodes as\n%s\nwant\n%s", i, got, s)
		}
	}
	first, _ := DecodeToken(v.V4Serialized[0])
	if first.Mint != "http://localhost:3338" || first.Unit != "sat" || first.Memo != "Thank you" ||
		len(first.Proofs) != 1 || first.Proofs[0].ID != "00ad268c4d1f5826" || first.Proofs[0].Amount != 1 ||
		first.Proofs[0].Secret != "9a6dbb847bd232ba76db0df197216b29d3b8cc14553cd27827fc1cc942fedb4e" ||
		first.Proofs[0].C != "038618543ffb6b8695df4ad4babcde92a34a96bdcd97dcee0d7ccf98d472126792" {
		t.Errorf("vector 0 decodes as %+v", first.Proofs)
	}
	multi, _ := DecodeToken(v.V4Serialized[1])
	if ids := []string{multi.Proofs[0].ID, multi.Proofs[1].ID, multi.Proofs[2].ID}; ids[0] != "00ffd48b8f5ecf80" || ids[1] != "00ad268c4d1f5826" || ids[2] != ids[1] {
		t.Errorf("multi-keyset vector ids %v", ids)
	}
	// The raw form is "craw" "B" and the CBOR: its CBOR is vector 0's.
	raw := mustHex(t, v.V4RawHex)
	b64, _ := decodeBase64(strings.TrimPrefix(v.V4Serialized[0], prefixV4))
	if !bytes.Equal(raw[len("crawB"):], b64) {
		t.Error("raw V4 vector's CBOR differs from the serialized one's")
	}
}

func TestTokenV3_NUT00Vectors(t *testing.T) {
	var v nut00
	readVectors(t, "nut00.json", &v)
	var want tokenV3
	if err := json.Unmarshal(v.V3JSON, &want); err != nil {
		t.Fatal(err)
	}
	tok := Token{Mint: want.Token[0].Mint, Unit: want.Unit, Memo: want.Memo, Proofs: want.Token[0].Proofs}
	got, err := tok.EncodeV3()
	if err != nil {
		t.Fatal(err)
	}
	if got != v.V3Serialized {
		t.Errorf("EncodeV3 =\n%s\nwant\n%s", got, v.V3Serialized)
	}
	dec, err := DecodeToken(v.V3Serialized)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Mint != tok.Mint || dec.Memo != "Thank you." || len(dec.Proofs) != 2 || dec.Proofs[1].Secret != tok.Proofs[1].Secret {
		t.Errorf("decoded %v", dec)
	}
	for _, s := range v.V3Invalid {
		if _, err := DecodeToken(s); !errors.Is(err, ErrToken) {
			t.Errorf("invalid V3 vector decodes (err %v)", err)
		}
	}
	for _, s := range v.V3Padding {
		if tk, err := DecodeToken(s); err != nil || tk.Memo != "Thank you very much." {
			t.Errorf("padded/unpadded V3 vector: %v, memo %q", err, tk.Memo)
		}
	}
	if len(v.V3Invalid) != 2 || len(v.V3Padding) != 2 {
		t.Fatal("V3 vectors missing")
	}
}

func sampleToken(t *testing.T) Token {
	t.Helper()
	var v nut12
	readVectors(t, "nut12.json", &v)
	p := v.Proof.Proof
	q := p
	q.Amount, q.ID, q.DLEQ, q.Witness = 4, "009a1f293253e41e", nil, `{"signatures":[]}`
	return Token{Mint: "http://127.0.0.1:3338", Unit: "sat", Memo: "<&>", Proofs: []Proof{p, q}}
}

func TestToken_RoundTripsBothVersions(t *testing.T) {
	tok := sampleToken(t)
	for name, enc := range map[string]func() (string, error){"V4": tok.EncodeV4, "V3": tok.EncodeV3} {
		s, err := enc()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeToken(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a, _ := json.Marshal(got.Proofs)
		b, _ := json.Marshal(tok.Proofs)
		if !bytes.Equal(a, b) || got.Mint != tok.Mint || got.Unit != tok.Unit || got.Memo != tok.Memo {
			t.Errorf("%s round trip:\n%s\nwant\n%s", name, a, b)
		}
	}
}

func TestToken_RefusesOversizedAndMalformed(t *testing.T) {
	huge := prefixV4 + strings.Repeat("A", MaxTokenLen)
	if _, err := DecodeToken(huge); !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("oversized token: %v", err)
	}
	// An array header claiming 2^32 elements in a few bytes.
	if _, err := decodeCBOR([]byte{0x9a, 0xff, 0xff, 0xff, 0xff, 0x00}); !errors.Is(err, ErrCBOR) {
		t.Errorf("lying array length: %v", err)
	}
	deep := bytes.Repeat([]byte{0x81}, maxCBORDepth+2)
	if _, err := decodeCBOR(append(deep, 0x00)); !errors.Is(err, ErrCBOR) {
		t.Errorf("deep nesting: %v", err)
	}
	for name, s := range map[string]string{
		"no prefix":      "cashuCabc",
		"bad base64":     "cashuB!!!",
		"not a map":      prefixV4 + b64url([]byte{0x01}),
		"indefinite":     prefixV4 + b64url([]byte{0xbf, 0xff}),
		"float":          prefixV4 + b64url([]byte{0xfb, 0, 0, 0, 0, 0, 0, 0, 0}),
		"trailing bytes": prefixV4 + b64url([]byte{0xa0, 0x00}),
		"empty":          prefixV4 + b64url([]byte{0xa0}),
	} {
		if _, err := DecodeToken(s); !errors.Is(err, ErrToken) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func b64url(b []byte) string {
	return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(stdB64(b)), "=")
}

// TestToken_NeverShowsItsSecrets: %v, %+v, %#v, slog and decode errors of
// a token and its proofs carry no secret or signature.
func TestToken_NeverShowsItsSecrets(t *testing.T) {
	tok := sampleToken(t)
	secret, sig := tok.Proofs[0].Secret, tok.Proofs[0].C
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("got", "token", tok, "proof", tok.Proofs[0])
	enc, _ := tok.EncodeV4()
	out := []string{
		fmt.Sprintf("%v %+v %#v", tok, tok, tok),
		fmt.Sprintf("%v %+v %#v", tok.Proofs, tok.Proofs[0], tok.Proofs[0]),
		logged.String(),
	}
	// A decode error of a damaged token must not echo it either.
	_, err := DecodeToken(enc[:len(enc)-3] + "!!!")
	out = append(out, fmt.Sprint(err))
	_, err = DecodeToken(prefixV3 + b64url([]byte(`{"token":[{"mint":"m","proofs":[{"secret":"`+secret+`",}]}]}`)))
	out = append(out, fmt.Sprint(err))
	for _, s := range out {
		if strings.Contains(s, secret) || strings.Contains(s, sig) || strings.Contains(s, enc[10:40]) {
			t.Errorf("secret material in %q", s)
		}
	}
}

func stdB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
