package channel

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"fiatjaf.com/nostr"

	"github.com/cvmgo/cvm/did"
)

func testReceipt() SubRAV {
	return SubRAV{Version: 1, ChannelID: ID{0xab, 1}, VMIDFragment: FragmentNostr, AccumulatedAmount: 21000, Nonce: 7}
}

func TestNewID_LayoutIsLengthPrefixedKeysThenHash(t *testing.T) {
	server, client := []byte{1, 2, 3}, []byte{4, 5}
	hash := [32]byte{9}
	got, err := NewID(server, client, hash)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(append([]byte{3, 1, 2, 3, 2, 4, 5}, hash[:]...))
	if got != ID(want) {
		t.Fatalf("NewID = %s, want %x", got, want)
	}
	// Moving a byte from one key to the other changes the id.
	other, _ := NewID([]byte{1, 2}, []byte{3, 4, 5}, hash)
	if other == got {
		t.Fatal("keys split differently give the same id")
	}
	if _, err := NewID(nil, client, hash); err == nil {
		t.Fatal("an empty server key makes an id")
	}
}

func TestTag_RoundTripsAndCarriesTheTransportJSON(t *testing.T) {
	r := testReceipt()
	tag, err := Tag(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"1","chainId":"0","channelId":"0xab01000000000000000000000000000000000000000000000000000000000000","channelEpoch":"0","vmIdFragment":"nostr","accumulatedAmount":"21000","nonce":"7"}`
	if tag[0] != "channel" || tag[1] != want {
		t.Fatalf("tag = %q", tag)
	}
	got, ok, err := FromTags(nostr.Tags{{"p", "x"}, tag})
	if err != nil || !ok || got != r {
		t.Fatalf("FromTags = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := FromTags(nostr.Tags{{"p", "x"}}); ok || err != nil {
		t.Fatalf("no tag: ok %v err %v", ok, err)
	}
	if _, _, err := FromTags(nostr.Tags{tag, tag}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("two tags: %v", err)
	}
}

func TestDecoders_RefuseMalformedInput(t *testing.T) {
	r := testReceipt()
	good := string(r.AppendJSON(nil))
	swap := func(old, new string) nostr.Tag { return nostr.Tag{"channel", strings.Replace(good, old, new, 1)} }
	for name, tag := range map[string]nostr.Tag{
		"extra element":     {"channel", good, "x"},
		"not JSON":          {"channel", "{"},
		"leading zero":      swap(`"nonce":"7"`, `"nonce":"07"`),
		"sign":              swap(`"nonce":"7"`, `"nonce":"+7"`),
		"number not string": swap(`"nonce":"7"`, `"nonce":7`),
		"beyond 64 bits":    swap(`"accumulatedAmount":"21000"`, `"accumulatedAmount":"18446744073709551616"`),
		"missing field":     swap(`,"nonce":"7"`, ``),
		"short id":          swap(`"0xab01`, `"0xab`),
		"version 2":         swap(`"version":"1"`, `"version":"2"`),
		"empty fragment":    swap(`"nostr"`, `""`),
		"fragment quote":    swap(`"nostr"`, `"no\"str"`),
		"too long":          {"channel", good + strings.Repeat(" ", maxTag)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseTag(tag); !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseTag(%q) = %v, want ErrMalformed", tag, err)
			}
		})
	}
	for name, h := range map[string]string{
		"no prefix":                          "eyJ2ZXJzaW9uIjoxfQ",
		"bad base64":                         "u!!!",
		"padding":                            "ueyJ2ZXJzaW9uIjoxfQ==",
		"version 2":                          "u" + "eyJ2ZXJzaW9uIjoyfQ",
		"too long":                           "u" + strings.Repeat("A", maxHeader),
		"empty value":                        "",
		"signed receipt without its receipt": "ueyJ2ZXJzaW9uIjoxLCJzaWduZWRTdWJSYXYiOnsic2lnbmF0dXJlIjoidUFBQUEifX0",
		"signed receipt without a signature": "ueyJ2ZXJzaW9uIjoxLCJzaWduZWRTdWJSYXYiOnsic3ViUmF2Ijp7InZlcnNpb24iOiIxIiwiY2hhaW5JZCI6IjAiLCJjaGFubmVsSWQiOiIweDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAiLCJjaGFubmVsRXBvY2giOiIwIiwidm1JZEZyYWdtZW50IjoiayIsImFjY3VtdWxhdGVkQW1vdW50IjoiMCIsIm5vbmNlIjoiMSJ9fX0",
	} {
		t.Run("header "+name, func(t *testing.T) {
			if _, err := DecodeHeader(h); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeHeader(%.40q) = %v, want ErrMalformed", h, err)
			}
		})
	}
}

func TestSign_Secp256k1DIDKey(t *testing.T) {
	s, err := did.GenerateKey(did.Secp256k1)
	if err != nil {
		t.Fatal(err)
	}
	r := testReceipt()
	r.VMIDFragment = Fragment(s.KeyID())
	signed, err := Sign(t.Context(), s, r)
	if err != nil {
		t.Fatal(err)
	}
	h, err := EncodeHeader(&Payload{Version: 1, ClientTxRef: "c1", SignedSubRAV: &signed})
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SignedSubRAV.Verify(s.PublicKey()); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	other, _ := did.GenerateKey(did.Secp256k1)
	if err := p.SignedSubRAV.Verify(other.PublicKey()); !errors.Is(err, did.ErrBadSignature) {
		t.Fatalf("another key's verify: %v", err)
	}
}

func TestCode_HTTPStatusIsNIP4s(t *testing.T) {
	for c, want := range map[Code]int{
		CodeInsufficientFunds: 402, CodeConflict: 409, CodeDuplicate: 409, CodeNotFound: 404,
		CodeEpochMismatch: 400, CodeClosed: 400, CodeTampered: 400, CodeInvalidSignature: 400,
		CodeMaxAmountExceeded: 400, Code("SOMETHING_ELSE"): 500,
	} {
		if got := c.HTTPStatus(); got != want {
			t.Errorf("%s: %d, want %d", c, got, want)
		}
	}
}
