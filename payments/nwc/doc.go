// Package nwc speaks NIP-47, Nostr Wallet Connect: a client that uses a
// remote Lightning wallet through a relay, and a wallet service that
// serves the wallets of the lnsim simulator the same way.
//
// A connection is a URI, nostr+walletconnect://<wallet service pubkey>?
// relay=…&secret=…, whose secret is the client's key: URI never prints it
// (String redacts it; Reveal is the one way out).
//
// The Client implements payments.Wallet (make_invoice, lookup_invoice,
// pay_invoice) plus get_info and get_balance. Each request is a kind 23194
// event p-tagged to the wallet and encrypted with NIP-44 when the wallet's
// kind 13194 info event lists "nip44_v2", with NIP-04 otherwise (an info
// event without an encryption tag means NIP-04); the answer is the kind
// 23195 event e-tagged to it. An error the wallet answers with is a
// *payments.WalletError; a request nobody answers in time wraps
// ErrNoAnswer.
//
// A Client also hears the wallet's notifications (notify.go): Listen opens
// one subscription per connection, kind 23197 when the client speaks
// NIP-44 to the wallet and 23196 when NIP-04, by the wallet service key
// and p-tagged to the connection key, when the info event offers
// payment_received; it returns once a relay confirmed it, so that an
// invoice made afterwards cannot be paid unheard (a relay that does not
// confirm within 5 s fails it, and Listen answers false for a minute). Received waits for the
// payment_received of one payment hash. Notices are kept by hash for a
// while (a payer may be quicker than the one who waits), the first one
// wins, and whatever does not decrypt or check is logged and ignored.
// Close ends the subscription's reader.
//
// The Service is a simulator's wallet service: one service key and one
// client key per connection, NIP-44 and NIP-04 requests alike, the info
// event with ["encryption","nip44_v2 nip04"] and
// ["notifications","payment_received payment_sent"], and notifications as
// kind 23197 (NIP-44) and 23196 (NIP-04); NoNotifications and Mute make
// it a wallet without them, or one that offers them and never sends one;
// Methods limits a connection to some methods (the info event lists those,
// the others are answered RESTRICTED), as a receive-only connection. A
// client reads what its connection may do from the info event
// (Capabilities; CanPay for pay_invoice).
//
// A Client keeps one subscription to its wallet's responses, opened at
// its first request and shared by all (a request costs a publish, not a
// subscription's round trip before it), and each side of a connection
// derives its shared secrets and signing key once.
//
// Files: uri.go (the connection URI), protocol.go (kinds, messages and
// their decoders), crypto.go (NIP-04's checked decryption), keys.go (a
// connection's keys: encryption and signing), client.go (requests),
// responses.go (the client's response feed), notify.go (the client's
// notifications), service.go (the simulator's wallet service).
package nwc
