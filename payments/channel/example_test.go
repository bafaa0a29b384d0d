package channel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/channel"
)

// A channel's life on the server's books and the client's side: open from
// a verified deposit, two calls paid by receipts riding as tags, a receipt
// lost on the way and resynchronised, then closed with the rest owed.
func Example() {
	ctx := context.Background()
	server, client := []byte("server public key"), []byte("client public key")
	books, _ := channel.New(channel.Options{
		Store: durable.NewMemory(durable.Options{}), ServerKey: server, Log: slog.New(slog.DiscardHandler),
	})

	// The deposit's Lightning payment was verified settled: open.
	state, _ := books.Open(ctx, channel.Funding{
		PaymentHash: [32]byte{1}, AmountMsat: 100_000, Client: client, Fragment: channel.FragmentNostr,
	})
	payer := channel.NewClient(state)

	call := func(price uint64, lost bool) error {
		r, err := payer.Pay(price)
		if err != nil || lost {
			return err
		}
		tag, _ := channel.Tag(r) // on the request event
		got, err := channel.ParseTag(tag)
		if err != nil {
			return err
		}
		_, err = books.Accept(ctx, client, &got, price, "request event id")
		var refused *channel.Error
		if errors.As(err, &refused) {
			p := refused.Payload() // the error answer's data
			s, _ := channel.StateOf(&p)
			payer.Resync(s)
		}
		return err
	}
	fmt.Println(call(21_000, false))
	fmt.Println(call(21_000, true)) // never reached the server
	fmt.Println(call(21_000, false))
	fmt.Println(call(21_000, false)) // resent after the refusal

	closed, _ := books.Close(ctx, client, state.Channel)
	fmt.Println("spent", closed.Accumulated, "owed", closed.Owed)
	// Output:
	// <nil>
	// <nil>
	// channel: RAV_CONFLICT: receipt 3, the next is 2
	// <nil>
	// spent 42000 owed 58000
}
