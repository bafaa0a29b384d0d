// Package secretenv is the one list of the environment variables cvm reads
// secrets from ($CVM_SECRET_KEY, the server's or client's key; $CVM_WALLET,
// a wallet connection URI that can make invoices and spend), and the
// environment cvm gives the processes it starts: its own without them.
//
// An MCP server behind the gateway or the room bridge is a third party's
// program; with the wallet URI it could spend, with the key it could sign
// as the server. An operator who means to hand one over names it
// (--pass-env), and Strip lets it through.
//
// A variable that comes to hold a secret joins Names, and every child is
// spared it at once. Files: secretenv.go.
package secretenv
