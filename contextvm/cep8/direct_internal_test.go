package cep8

import (
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments"
)

func FuzzDirectPaymentTag(f *testing.F) {
	f.Add("direct_payment", "fake-cash-direct", "fakecash:m:00", "direct_payment", "x")
	f.Add("direct_payment", "", "", "pmi", "fake-cash-direct")
	f.Fuzz(func(t *testing.T, a, b, c, d, e string) {
		tags := nostr.Tags{{a, b, c}, {d, e}, {a}, {}}
		pmi, payload, ok := directPayment(tags, func(pmi string) bool { return pmi == payments.PMIFakeCash })
		if !ok {
			if a == TagDirectPayment && b == payments.PMIFakeCash || d == TagDirectPayment && e == payments.PMIFakeCash {
				t.Fatalf("%v: a supported direct_payment missed", tags)
			}
			return
		}
		if pmi != payments.PMIFakeCash {
			t.Fatalf("%v: chose PMI %q", tags, pmi)
		}
		if a == TagDirectPayment && b == payments.PMIFakeCash && payload != c {
			t.Fatalf("%v: not the first tag's payload: %q", tags, payload)
		}
	})
}
