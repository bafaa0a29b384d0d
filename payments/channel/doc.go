// Package channel is cvm's prepaid payment channels (issue #30, seed 003
// §4.3): one Lightning payment opens a channel from a client to a server,
// then each priced call carries a cumulative receipt that the server checks
// against its own books, with no wallet round trip.
//
// Receipts are Nuwa NIP-4's SubRAV, in its BCS signing bytes, its JSON
// transport encoding and its X-Payment-Channel-Data header, with cvm's
// choices: amounts in millisatoshis, chain_id 0 (ChainLightning), channel
// ids from NewID, the payment method PMI. Unlike NIP-4's deferred billing,
// receipts are prepaid: a request's receipt includes the call it rides on.
// docs/protocol-compatibility.md ("Prepaid payment channels") is the
// protocol, written for another implementation.
//
// How the files fit:
//   - subrav.go: the receipt (SubRAV), its id (ID, NewID), its BCS bytes.
//   - transport.go: the JSON transport encoding of a receipt, and NIP-4's
//     payload (Payload) that the header carries.
//   - sign.go: a receipt signed by a did.Signer (Ed25519, secp256k1, …) and
//     verified with a did.PublicKey: the HTTP form.
//   - header.go: the X-Payment-Channel-Data header.
//   - tag.go: the Nostr form, a ["channel", <JSON>] tag on the request
//     event, authenticated by the event's signature.
//   - errors.go: the refusal codes (NIP-4's names), their HTTP statuses,
//     and Error, which carries the channel's state to resynchronise from.
//   - state.go: State, a channel as its books hold it, and the next receipt
//     it makes; StateOf reads one from a server's payload.
//   - books.go: the server's Books: open from a verified funding payment,
//     top up, accept receipts, close (by the client, or idle past a TTL);
//     record.go: a channel's one durable record.
//   - refund.go: the refund of a closed channel, paid once through a
//     Refunder, restarts included; wallet.go: a Refunder over a wallet's
//     pay_invoice (NWC), which tells a payment refused from one unknown.
//   - client.go: the client's side of a channel (Client): the next receipt
//     for a price, and resynchronising from the server's state.
//   - example_test.go: a channel's life through both sides, as the gate and
//     the payer will drive it; replicas_test.go: Books of two processes
//     on one store, racing.
//
// Every change to a channel is one write of its record, made under the
// channel's lock before the method returns: a receipt accepted is recorded
// before the call it pays runs, and never accepted again, across restarts.
// When the store is a durable.Swapper (the file store, and the NATS bucket
// a replica group shares) the write is a swap over the record as it was
// read, so that Books of several processes on one store keep one set of
// books: a change that lost to another process's is made again on the
// record as it now is, and a receipt that another call's receipt overtook
// is refused with the state to resend from (ErrConflict). A refund is paid
// by one process at a time (a mark in the store, refund.go).
package channel
