package nwc_test

import (
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/nwc"
)

// FuzzDecode feeds the NIP-47 message decoders arbitrary bytes: they never
// panic, and what they accept survives a re-encoding unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"method":"pay_invoice","params":{"invoice":"lnbcrt1..."}}`,
		`{"method":"get_balance"}`,
		`{"result_type":"get_balance","error":null,"result":{"balance":1000}}`,
		`{"result_type":"pay_invoice","error":{"code":"INSUFFICIENT_BALANCE","message":"no"},"result":null}`,
		`{"notification_type":"payment_received","notification":{"type":"incoming","payment_hash":"00","amount":1}}`,
		`null`, `[]`, `{"method":""}`, `{"result_type":"x"}`, `{"method":"x","params":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := nwc.DecodeRequest(b); err == nil {
			again, err := nwc.DecodeRequest(mustJSON(t, r))
			if err != nil || again.Method != r.Method || !jsonEqual(again.Params, r.Params) {
				t.Fatalf("request %+v re-decodes as %+v (%v)", r, again, err)
			}
		}
		if r, err := nwc.DecodeResponse(b); err == nil {
			again, err := nwc.DecodeResponse(mustJSON(t, r))
			if err != nil || again.ResultType != r.ResultType || !reflect.DeepEqual(again.Error, r.Error) || !jsonEqual(again.Result, r.Result) {
				t.Fatalf("response %+v re-decodes as %+v (%v)", r, again, err)
			}
		}
		if n, err := nwc.DecodeNotification(b); err == nil {
			again, err := nwc.DecodeNotification(mustJSON(t, n))
			if err != nil || !reflect.DeepEqual(again, n) {
				t.Fatalf("notification %+v re-decodes as %+v (%v)", n, again, err)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	ea, eb := json.Unmarshal(a, &x), json.Unmarshal(b, &y)
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || (ea != nil) == (eb != nil)
	}
	return ea == nil && eb == nil && reflect.DeepEqual(x, y)
}

// FuzzDecrypt feeds the decryption of request and response contents (a
// wallet service decrypts whatever a client sends it, a client whatever
// comes back) arbitrary ciphertexts in both schemes: it never panics, and
// a NIP-04 or NIP-44 content it accepts decrypts to what encrypting that
// plaintext again decrypts to.
func FuzzDecrypt(f *testing.F) {
	sk, peer := nostr.Generate(), nostr.Generate()
	for _, scheme := range []string{nwc.EncryptionNIP04, nwc.EncryptionNIP44} {
		c, err := nwc.EncryptForTest(scheme, `{"method":"get_balance"}`, peer, sk.Public())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(scheme == nwc.EncryptionNIP04, c)
	}
	for _, s := range []string{"", "?iv=", "abc?iv=def", "AAAA?iv=AAAAAAAAAAAAAAAAAAAAAA==", "AAAAAAAAAAAAAAAAAAAAAA==?iv=AAAAAAAAAAAAAAAAAAAAAA==",
		"AQ==?iv=AAAAAAAAAAAAAAAAAAAAAA==", "Ag==", "#", "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		f.Add(true, s)
		f.Add(false, s)
	}
	f.Fuzz(func(t *testing.T, nip04 bool, ciphertext string) {
		scheme := nwc.EncryptionNIP44
		if nip04 {
			scheme = nwc.EncryptionNIP04
		}
		plain, err := nwc.DecryptForTest(scheme, ciphertext, sk, peer.Public())
		if err != nil {
			return
		}
		again, err := nwc.EncryptForTest(scheme, plain, peer, sk.Public())
		if err != nil {
			if plain == "" || len(plain) > 65535 {
				return // nothing NIP-44 may carry
			}
			t.Fatalf("%s: %q decrypted but does not encrypt again: %v", scheme, plain, err)
		}
		if back, err := nwc.DecryptForTest(scheme, again, sk, peer.Public()); err != nil || back != plain {
			t.Fatalf("%s: %q round-trips to %q (%v)", scheme, plain, back, err)
		}
	})
}

// FuzzNotification feeds the listener's reading of a notification event
// (decrypt, decode, check) arbitrary contents, encrypted properly or not,
// on either kind, p-tagged or not: it never panics, and what it accepts
// is a payment received, for a 32-byte lowercase hex hash and a positive
// amount, that the plaintext says so of.
func FuzzNotification(f *testing.F) {
	wallet, me := nostr.Generate(), nostr.Generate()
	for _, s := range []string{
		`{"notification_type":"payment_received","notification":{"type":"incoming","payment_hash":"` + strings.Repeat("0a", 32) + `","amount":1000}}`,
		`{"notification_type":"payment_sent","notification":{"type":"outgoing","payment_hash":"` + strings.Repeat("0a", 32) + `","amount":1000}}`,
		`{"notification_type":"payment_received","notification":{"payment_hash":"AA","amount":-1}}`,
		`{"notification_type":"payment_received","notification":null}`, `null`, `{}`, "",
	} {
		f.Add(true, true, true, s)
		f.Add(false, true, true, s)
		f.Add(true, false, true, s)
	}
	f.Fuzz(func(t *testing.T, nip44, encrypted, tagged bool, body string) {
		scheme, kind := nwc.EncryptionNIP04, nwc.KindNotificationNIP04
		if nip44 {
			scheme, kind = nwc.EncryptionNIP44, nwc.KindNotificationNIP44
		}
		content := body
		if encrypted {
			c, err := nwc.EncryptForTest(scheme, body, wallet, me.Public())
			if err != nil {
				return // nothing NIP-44 may carry
			}
			content = c
		}
		evt := nostr.Event{Kind: kind, PubKey: wallet.Public(), Content: content}
		if tagged {
			evt.Tags = nostr.Tags{{"p", me.Public().Hex()}}
		}
		tx, err := nwc.ReadNotificationForTest(evt, scheme, wallet.Public(), me)
		if err != nil {
			return
		}
		if !tagged {
			t.Fatalf("accepted a notification not p-tagged to the client: %+v", tx)
		}
		b, herr := hex.DecodeString(tx.PaymentHash)
		if herr != nil || len(b) != 32 || strings.ToLower(tx.PaymentHash) != tx.PaymentHash || tx.Amount <= 0 {
			t.Fatalf("accepted %+v", tx)
		}
		plain, derr := nwc.DecryptForTest(scheme, content, me, wallet.Public())
		n, nerr := nwc.DecodeNotification([]byte(plain))
		if derr != nil || nerr != nil || n.Type != nwc.NotificationReceived || !reflect.DeepEqual(n.Notification, tx) {
			t.Fatalf("accepted %+v from %q (%v %v)", tx, plain, derr, nerr)
		}
	})
}
