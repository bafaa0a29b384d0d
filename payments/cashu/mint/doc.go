// Package mint is an offline Cashu mint, the engine of cvm mint-sim: NUT-00
// to NUT-07 with bolt11 (NUT-23), NUT-08 change and NUT-12 DLEQ proofs on
// every signature, one keyset in sat, over a Lightning it is given (a
// NIP-47 wallet in cvm, lnsim in tests).
//
// What must not happen twice is guarded by durable.Store.Claim, written
// before the action it guards: a proof's Y is claimed before the outputs it
// pays for are signed, a blinded message before it is signed, a mint
// quote before its ecash is issued. A request claims all its keys or none
// (a swap whose second input is spent releases its first), so of two
// swaps of one proof exactly one wins. Beside each claim the mint keeps a
// digest of the request that made it: the same request sent again (an
// answer lost, the mint restarted between claiming and answering) is
// answered again with the same signatures, since signing and its DLEQ
// nonce are deterministic; any other request is refused. A melt claims its
// proofs and marks them pending before pay_invoice: a failed payment
// releases them (UNSPENT again), a paid one clears the marks (SPENT), an
// unknown outcome leaves the quote PENDING until a lookup settles it.
//
// Files: mint.go (Options, New, the Mint), keys.go (the keyset derived from
// the seed), lightning.go (the Lightning and Notifier seams), claim.go (the
// store's spaces, claims, their owners and release), verify.go (checking
// inputs and outputs, signing), swap.go (NUT-03 and the error of a lost
// claim), mintquote.go (NUT-04 quotes, their payment by notification or
// lookup, issuing), melt.go (NUT-05 quotes, paying, change), state.go
// (NUT-07), info.go (NUT-06), http.go (the HTTP API on a ServeMux, NUT
// error bodies).
package mint
