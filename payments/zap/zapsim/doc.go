// Package zapsim serves Lightning addresses for the wallets of a
// simulated Lightning network (payments/lnsim), for tests, CI and demos:
// per wallet an LNURL-pay endpoint with NIP-57 (allowsNostr, nostrPubkey)
// at https://127.0.0.1:PORT/.well-known/lnurlp/NAME, so NAME@127.0.0.1:PORT
// is its address, and a zap receipt (kind 9735) published to the zap
// request's relays once its invoice is paid. It is a simulator: its sats
// are not money, and the zaps it is asked for are kept in memory only.
//
// It speaks HTTPS, as LNURL requires, with a throw-away certificate
// authority made at start: its certificate is written to a file that a
// test hands to Node (NODE_EXTRA_CA_CERTS) and to cvm (outbound's test
// trust, CVM_TEST_OUTBOUND_CA); the server's certificate names 127.0.0.1.
//
// Files: server.go (the endpoints and the receipts), ca.go (the
// throw-away certificate authority).
package zapsim
