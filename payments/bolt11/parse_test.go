package bolt11

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
)

// Parse reads every field as Decode does and skips only the signature's
// check: an invoice whose signature is not its payee's is refused by
// Decode and read by Parse, with the payee it names.
func TestParse_SkipsOnlyTheSignaturesCheck(t *testing.T) {
	seed := sha256.Sum256([]byte("parse"))
	key, _ := btcec.PrivKeyFromBytes(seed[:])
	inv := Invoice{Currency: Regtest, Amount: 21_000, Timestamp: time.Unix(1_700_000_000, 0), Description: "a tool call", ExplicitPayee: true}
	inv.Hash[0] = 7
	s, err := Encode(inv, key)
	if err != nil {
		t.Fatal(err)
	}
	good, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(s)
	if err != nil || parsed.Amount != good.Amount || parsed.Hash != good.Hash || parsed.Description != good.Description ||
		!parsed.Timestamp.Equal(good.Timestamp) || parsed.NodeID != good.NodeID {
		t.Fatalf("Parse %+v, %v; want what Decode read, %+v", parsed, err, good)
	}

	// The same invoice with one bit of its signature's r flipped, the
	// checksum made again: the recovered key is no longer the payee's.
	hrp, data, err := bech32Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-104] ^= 1
	forged := bech32Encode(hrp, data)
	if _, err := Decode(forged); err == nil {
		t.Fatal("Decode accepted a signature that is not the payee's")
	}
	parsed, err = Parse(forged)
	if err != nil || parsed.Amount != good.Amount || parsed.Hash != good.Hash || parsed.NodeID != good.NodeID {
		t.Fatalf("Parse of the forged signature: %+v, %v; want its fields read", parsed, err)
	}
	if _, err := Parse(s[:len(s)-10]); err == nil {
		t.Fatal("Parse accepted a truncated invoice")
	}
}
