package channel

import (
	"bytes"
	"encoding/hex"
	"testing"

	"fiatjaf.com/nostr"
)

// Each decoder of what a peer sends: whatever it accepts encodes again to
// what decodes to the same value.

func FuzzParseBCS(f *testing.F) {
	b, _ := hex.DecodeString("01040000000000000001111111111111111111111111111111111111111111111111111111111111111100000000000000000b6163636f756e742d6b657960e31600000000000000000000000000000000000000000000000000000000000300000000000000")
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseBCS(b)
		if err != nil {
			return
		}
		if again := r.BCS(); !bytes.Equal(again, b) {
			t.Fatalf("BCS %x decoded and encoded is %x", b, again)
		}
	})
}

func FuzzParseTag(f *testing.F) {
	r := testReceipt()
	f.Add(string(r.AppendJSON(nil)))
	f.Add(`{"version":"1","chainId":"0","channelId":"0xAB","channelEpoch":"0","vmIdFragment":"n","accumulatedAmount":"0","nonce":"0"}`)
	f.Fuzz(func(t *testing.T, v string) {
		r, err := ParseTag(nostr.Tag{TagName, v})
		if err != nil {
			return
		}
		tag, err := Tag(r)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", r, err)
		}
		back, err := ParseTag(tag)
		if err != nil || back != r {
			t.Fatalf("%q: decoded %+v, again %+v, %v", v, r, back, err)
		}
	})
}

func FuzzDecodeHeader(f *testing.F) {
	v := loadVector(f)
	f.Add(v.RequestHeader)
	f.Add(v.ResponseHeader)
	f.Fuzz(func(t *testing.T, h string) {
		p, err := DecodeHeader(h)
		if err != nil {
			return
		}
		enc, err := EncodeHeader(&p)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", p, err)
		}
		back, err := DecodeHeader(enc)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := MarshalPayload(&p)
		b, _ := MarshalPayload(&back)
		if !bytes.Equal(a, b) {
			t.Fatalf("%q: %s, again %s", h, a, b)
		}
	})
}

// FuzzDecodeRecord: a stored record is the process's own, but a damaged
// file must give an error, not a panic.
func FuzzDecodeRecord(f *testing.F) {
	rec := record{State: State{Channel: ID{1}, Fragment: "nostr", Deposit: 5}, Client: []byte{1, 2}, Funding: [][32]byte{{3}}, Invoice: "lnbc"}
	f.Add(rec.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		back, err := decodeRecord(r.encode())
		if err != nil || back.State != r.State || !bytes.Equal(back.Client, r.Client) || back.Invoice != r.Invoice {
			t.Fatalf("record %x: %+v, again %+v, %v", b, r, back, err)
		}
	})
}
