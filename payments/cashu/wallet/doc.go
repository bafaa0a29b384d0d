// Package wallet is a Cashu wallet in sats: it holds ecash proofs at any
// number of mints, buys them with Lightning (NUT-04), pays with them as
// tokens (cashuB) and receives tokens by swapping them at their mint
// (NUT-03), so that only it holds the proofs it keeps. The cryptography,
// tokens and wire types are package cashu's.
//
// Proofs are bearer secrets. They live in one file per mint (mode 0600,
// directory 0700), rewritten whole (a temporary file fsynced and renamed
// over it) and locked for the length of an operation, so that two
// processes never lose each other's proofs. Before a request that has the
// mint sign new outputs, their secrets and blinding factors are written as
// a pending operation, which the next operation at that mint finishes by
// sending the same request again (recover.go: complete with a mint that
// answers a repeat, as cvm mint-sim does). No proof, output or token
// appears in a log line or an error.
//
// Every DLEQ proof is verified (NUT-12): on the mint's signatures always,
// on a received token's proofs when they carry one.
//
// Files: client.go (the mint's HTTP API and URL rules), keys.go (keysets:
// fetched, checked against their ids, remembered by the Wallet, fees,
// unblinding), store.go (the
// proof files), wallet.go (mint, send, receive, balance), recover.go
// (finishing interrupted operations), direct.go (CEP-8 direct payments,
// the server's side: Redeemer, a payments.Redeemer and Requirer whose
// payment requests are NUT-18 creqA) and bearer.go (their client's side:
// Bearer, a payments.Bearer, and Restore).
package wallet
