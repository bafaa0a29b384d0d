package channel

import (
	"errors"
	"testing"

	"github.com/cvmgo/cvm/durable"
)

// A client that lost a receipt on the way (the server never saw it) is
// refused once, takes the state the refusal carries, and pays again; the
// server's books end with one debit per call that ran.
func TestClient_ResyncsFromTheServersState(t *testing.T) {
	f := newFixture(t, durable.NewMemory(durable.Options{}))
	c := NewClient(f.open(t, 1000))
	if _, err := c.Pay(100); err != nil { // lost: never reaches the server
		t.Fatal(err)
	}
	r, err := c.Pay(100)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.books.Accept(t.Context(), clientKey, &r, 100, "call")
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeConflict {
		t.Fatalf("Accept: %v, want RAV_CONFLICT", err)
	}
	// Over the wire: the error payload, decoded by the client.
	h, err := EncodeHeader(new(e.Payload()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := StateOf(&p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(s); err != nil {
		t.Fatal(err)
	}
	if r, err = c.Pay(100); err != nil {
		t.Fatal(err)
	}
	got, err := f.books.Accept(t.Context(), clientKey, &r, 100, "call")
	if err != nil || got.Accumulated != 100 || got.Nonce != 1 {
		t.Fatalf("after resync: %+v, %v", got, err)
	}
	if _, err := c.Pay(901); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("paying beyond the deposit: %v", err)
	}
	other := s
	other.Channel[0]++
	if err := c.Resync(other); err == nil {
		t.Fatal("another channel's state was taken")
	}
}
