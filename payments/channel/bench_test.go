package channel

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/durable"
)

// BenchmarkAccept is a server's work per paid call on a channel beyond the
// event signature: read the receipt off the request's tag, check it against
// the books and record it in the durable store (on disk) before the call
// runs.
func BenchmarkAccept(b *testing.B) {
	store, err := durable.Open(b.TempDir(), "state", durable.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	books, err := New(Options{Store: store, ServerKey: serverKey, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := books.Open(b.Context(), Funding{PaymentHash: [32]byte{1}, AmountMsat: 1 << 62, Client: clientKey, Fragment: FragmentNostr})
	if err != nil {
		b.Fatal(err)
	}
	c := NewClient(s)
	const price = 21_000
	ref := strings.Repeat("e", 64) // an event id
	for b.Loop() {
		b.StopTimer()
		r, err := c.Pay(price)
		if err != nil {
			b.Fatal(err)
		}
		tag, _ := Tag(r)
		b.StartTimer()

		got, err := ParseTag(tag)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := books.Accept(b.Context(), clientKey, &got, price, ref); err != nil {
			b.Fatal(err)
		}
	}
}
