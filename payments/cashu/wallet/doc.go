// Package wallet is a Cashu wallet in sats: it holds ecash proofs at any
// number of mints, buys them with Lightning (NUT-04), pays with them as
// tokens (cashuB) and receives tokens by swapping them at their mint
// (NUT-03), so that only it holds the proofs it keeps. The cryptography,
// tokens and wire types are package cashu's.
//
// Proofs are bearer secrets. They live in one file per mint (mode 0600,
// directory 0700), locked for the length of an operation, so that two
// processes never lose each other's proofs. The file is a journal (JSON
// Lines): its first record is the whole state (the spendable proofs, the
// pending operations, the tokens sent), each later one what a save
// changed (proofs added and spent, operations begun and finished, tokens
// sent and taken back), each with its checksum and written with one
// write(2), so that an operation costs what it changed, not what the
// file holds. A Wallet reads a file once and then, at each operation,
// only the records other processes appended since; past max(64 KiB, twice
// its first record) it is compacted into one record (written whole: a
// temporary file fsynced and renamed over it). A torn last record (a
// power loss mid-write) is cut off; a damaged record before it is
// ErrCorrupt. Files of version 1 (one JSON document) are converted when
// first opened.
//
// Durability: a record is in the file, safe from a crash of the process
// (kill -9), once the call that wrote it returns. The Wallet fsyncs the
// files it appended to at most every Options.SyncInterval (1 s) and at
// Close, not per operation: a power loss (or a crash of the machine) can
// lose the changes of the last interval, as durable.Open's journal can,
// proofs received in it among them.
//
// Before a request that has the mint sign new outputs, their secrets and
// blinding factors are written as a pending operation, which the next
// operation at that mint finishes by sending the same request again
// (recover.go: complete with a mint that answers a repeat, as cvm
// mint-sim does). A token's proofs leave the spendable ones for a sent
// token before it is delivered, and come back if delivery fails (sent.go),
// so a send needs no NUT-07 request: no proof held was handed out. Sent
// tokens are forgotten once the mint says they are spent, asked once per
// compaction. No proof, output or token appears in a log line or an
// error.
//
// Every DLEQ proof is verified (NUT-12): on the mint's signatures always,
// on a received token's proofs when they carry one.
//
// Files: client.go (the mint's HTTP API and URL rules), keys.go (keysets:
// fetched, checked against their ids, remembered by the Wallet, fees,
// unblinding), store.go (the proof files: locked, read once, their
// changes saved), journal.go (their records and how they are written and
// read), state.go (a file's state in memory, and how a record changes
// it), syncer.go (the batched fsyncs), wallet.go (mint, send, receive,
// balance), sent.go (tokens handed out, and compaction forgetting the
// spent ones), recover.go (finishing interrupted operations), direct.go
// (CEP-8 direct payments, the server's side: Redeemer, a
// payments.Redeemer and Requirer whose payment requests are NUT-18 creqA)
// and bearer.go (their client's side: Bearer, a payments.Bearer, and
// Restore).
package wallet
