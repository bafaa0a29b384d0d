// Package cashu is the core of Cashu ecash (the NUT specifications) that
// cvm's mint and wallet share: the cryptography, the token and payment
// request encodings, and the JSON of the mint's HTTP API. It does no I/O.
//
// Cryptography: curve.go has NUT-00's hash_to_curve and blind Diffie-Hellman
// key exchange on secp256k1 (blind, sign, unblind, verify); dleq.go has
// NUT-12's DLEQ proofs, the mint's with its deterministic nonce and the
// wallet's check; output.go joins them per output: a wallet's Output
// (secret, blinding factor, blinded message) and how it turns the mint's
// BlindSignature into a Proof after checking its DLEQ, the mint's
// SignOutput, and the DLEQ checks of a BlindSignature and of a received
// Proof. keytable.go is a KeyTable, a mint key's precomputed multiples
// that make a wallet's repeated multiplications by that key (in each DLEQ
// check and unblinding) about 2.5 times faster. keyset.go derives NUT-02 version 00 keyset ids and prices inputs
// (input_fee_ppk); amount.go splits amounts into powers of two.
//
// Encodings: token.go is the Token and DecodeToken, which reads both
// versions within MaxTokenLen; tokenv4.go writes and reads cashuB (CBOR),
// tokenv3.go cashuA (JSON); creq.go is NUT-18's creqA payment request.
// cbor.go is the small CBOR subset both CBOR formats use, with limits on
// lengths and depth for untrusted input. redact.go keeps proofs, outputs
// and tokens, which are bearer secrets, out of every String, %#v and log
// line.
//
// Wire: wire.go has the request and response bodies of NUT-01 to NUT-07
// and NUT-23 (bolt11); errors.go the error body {detail, code} and the
// NUT error codes. The mint that serves them is package
// payments/cashu/mint.
//
// testdata holds the NUTs' own test vectors, which the tests match byte
// for byte.
package cashu
