package cep8

import (
	"strconv"
	"testing"

	"github.com/cvmgo/cvm/payments/channel"
)

// FuzzParseFunding: a channel_open or channel_topup tag, from any client,
// either funds a channel in whole sats that cover the call and stay under
// maxDeposit, naming the channel it tops up, or is refused.
func FuzzParseFunding(f *testing.F) {
	id := channel.ID{1, 2, 3}.String()
	f.Add(TagChannelOpen, "50000", "", uint64(2000))
	f.Add(TagChannelTopUp, id, "50000", uint64(2000))
	f.Add(TagChannelOpen, "1000", "", uint64(2000))
	f.Add(TagChannelOpen, "00100", "x", uint64(0))
	f.Add(TagChannelTopUp, "0x12", "-1", uint64(1))
	f.Fuzz(func(t *testing.T, name, a, b string, price uint64) {
		tag := []string{name, a}
		if b != "" {
			tag = append(tag, b)
		}
		var open, topUp []string
		if name == TagChannelOpen {
			open = tag
		} else {
			topUp = tag
		}
		fu, err := parseFunding(open, topUp, price)
		if err != nil {
			return
		}
		if fu.Amount == 0 || fu.Amount%1000 != 0 || fu.Amount > maxDeposit || fu.Amount < price || fu.Price != price {
			t.Fatalf("%q → %+v", tag, fu)
		}
		amount := a
		if topUp != nil {
			amount = b
			if got, err := channel.ParseID(a); err != nil || got != fu.TopUp {
				t.Fatalf("%q tops up %s", tag, fu.TopUp)
			}
		} else if fu.TopUp != (channel.ID{}) {
			t.Fatalf("%q: an open that tops up %s", tag, fu.TopUp)
		}
		if n, err := strconv.ParseUint(amount, 10, 64); err != nil || n != fu.Amount {
			t.Fatalf("%q: amount %d", tag, fu.Amount)
		}
	})
}
