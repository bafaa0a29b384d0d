package cashu

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// nut18Vector is one entry of testdata/nut18.json: a request as JSON and
// its encoding, from 18-tests.md.
type nut18Vector struct {
	JSON struct {
		I string   `json:"i"`
		A uint64   `json:"a"`
		U string   `json:"u"`
		S bool     `json:"s"`
		M []string `json:"m"`
		D string   `json:"d"`
		T []struct {
			T string     `json:"t"`
			A string     `json:"a"`
			G [][]string `json:"g"`
		} `json:"t"`
		NUT10 *struct {
			K string     `json:"k"`
			D string     `json:"d"`
			T [][]string `json:"t"`
		} `json:"nut10"`
	} `json:"json"`
	Encoded string `json:"encoded"`
}

func (v nut18Vector) request() PaymentRequest {
	j := v.JSON
	r := PaymentRequest{ID: j.I, Amount: j.A, Unit: j.U, SingleUse: j.S, Mints: j.M, Description: j.D}
	for _, t := range j.T {
		r.Transports = append(r.Transports, Transport{Type: t.T, Target: t.A, Tags: t.G})
	}
	if j.NUT10 != nil {
		r.NUT10 = &NUT10Option{Kind: j.NUT10.K, Data: j.NUT10.D, Tags: j.NUT10.T}
	}
	return r
}

func TestPaymentRequest_NUT18Vectors(t *testing.T) {
	var vs []nut18Vector
	readVectors(t, "nut18.json", &vs)
	if len(vs) != 6 {
		t.Fatalf("%d vectors, want 6", len(vs))
	}
	for i, v := range vs {
		dec, err := DecodePaymentRequest(v.Encoded)
		if err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		enc, err := dec.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if enc != v.Encoded {
			t.Errorf("vector %d re-encodes as\n%s\nwant\n%s", i, enc, v.Encoded)
		}
		if i == 0 {
			// 18-tests.md's first vector encodes NUT-18's own example
			// (another mint and nprofile) rather than the JSON above it.
			if dec.Mints[0] != "https://nofees.testnut.cashu.space" || dec.Amount != 10 || dec.Transports[0].Tags[0][1] != "17" {
				t.Errorf("vector 0 decodes as %+v", dec)
			}
			continue
		}
		if want := v.request(); !reflect.DeepEqual(dec, want) {
			t.Errorf("vector %d decodes as\n%+v\nwant\n%+v", i, dec, want)
		}
		if enc, _ := v.request().Encode(); enc != v.Encoded {
			t.Errorf("vector %d encodes from its JSON as\n%s\nwant\n%s", i, enc, v.Encoded)
		}
	}
}

func TestPaymentRequest_RefusesMalformed(t *testing.T) {
	for name, s := range map[string]string{
		"prefix":     "creqB" + stdB64([]byte{0xa0}),
		"oversized":  "creqA" + strings.Repeat("o", MaxPaymentRequestLen),
		"base64":     "creqA%%%",
		"not a map":  "creqA" + stdB64([]byte{0x80}),
		"amount":     "creqA" + stdB64([]byte{0xa1, 0x61, 'a', 0x61, 'x'}),
		"negative":   "creqA" + stdB64([]byte{0xa1, 0x61, 'a', 0x20}),
		"tags":       "creqA" + stdB64([]byte{0xa1, 0x61, 't', 0x81, 0xa3, 0x61, 't', 0x60, 0x61, 'a', 0x60, 0x61, 'g', 0x81, 0x01}),
		"dup key":    "creqA" + stdB64([]byte{0xa2, 0x61, 'i', 0x60, 0x61, 'i', 0x60}),
		"bad utf-8":  "creqA" + stdB64([]byte{0xa1, 0x61, 'd', 0x61, 0xff}),
		"nut10 kind": "creqA" + stdB64([]byte{0xa1, 0x65, 'n', 'u', 't', '1', '0', 0xa0}),
	} {
		if _, err := DecodePaymentRequest(s); !errors.Is(err, ErrPaymentRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := (PaymentRequest{Amount: 5}).Encode(); err == nil {
		t.Error("an amount without a unit encodes")
	}
}

func TestWire_ErrorBody(t *testing.T) {
	var e Error
	if err := json.Unmarshal([]byte(`{"detail":"Token already spent.","code":11001}`), &e); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(&e, &Error{Code: CodeProofsSpent}) || errors.Is(&e, &Error{Code: CodeUnbalanced}) {
		t.Errorf("errors.Is by code fails for %v", &e)
	}
	b, _ := json.Marshal(Errorf(CodeUnbalanced, "inputs %d, outputs %d", 3, 2))
	if string(b) != `{"detail":"inputs 3, outputs 2","code":11005}` {
		t.Errorf("error body %s", b)
	}
}

func TestSplitAmountAndFees(t *testing.T) {
	if got := SplitAmount(13); !reflect.DeepEqual(got, []uint64{1, 4, 8}) {
		t.Errorf("SplitAmount(13) = %v", got)
	}
	if got := SplitAmount(0); len(got) != 0 {
		t.Errorf("SplitAmount(0) = %v", got)
	}
	if got := SplitAmount(1 << 63); !reflect.DeepEqual(got, []uint64{1 << 63}) {
		t.Errorf("SplitAmount(2^63) = %v", got)
	}
	ppk := map[string]uint64{"a": 100, "b": 0, "c": 1000}
	lookup := func(id string) (uint64, bool) { v, ok := ppk[id]; return v, ok }
	for _, tc := range []struct {
		ids  []string
		want uint64
	}{
		{nil, 0}, {[]string{"b", "b"}, 0}, {[]string{"a"}, 1}, {[]string{"a", "a", "a", "a", "a", "a", "a", "a", "a", "a"}, 1},
		{[]string{"a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"}, 2}, {[]string{"c", "a"}, 2}, {[]string{"c", "c"}, 2},
	} {
		proofs := make([]Proof, len(tc.ids))
		for i, id := range tc.ids {
			proofs[i].ID = id
		}
		if got, err := InputFees(proofs, lookup); err != nil || got != tc.want {
			t.Errorf("fees of %v = %d, %v; want %d", tc.ids, got, err, tc.want)
		}
	}
	if _, err := InputFees([]Proof{{ID: "z"}}, lookup); !errors.Is(err, ErrKeyset) {
		t.Errorf("unknown keyset: %v", err)
	}
}
