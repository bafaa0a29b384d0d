package nwc

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// Scheme is the URI scheme of a wallet connection.
const Scheme = "nostr+walletconnect"

// ErrInvalidURI is wrapped by every error ParseURI returns.
var ErrInvalidURI = errors.New("invalid nostr+walletconnect URI")

// URI is a wallet connection: the wallet service's public key, the relays
// it listens on, and the secret key the client signs and encrypts with.
//
// The secret never appears in String, GoString or an error: printing a URI
// shows secret=REDACTED. Reveal returns the full URI, for the one place
// that must write it (a secret file, or the wallet simulator's ready line).
type URI struct {
	Wallet nostr.PubKey
	Relays []string
	LUD16  string
	secret nostr.SecretKey
}

// NewURI returns the connection to wallet over relays with the client
// secret key secret.
func NewURI(wallet nostr.PubKey, relays []string, secret nostr.SecretKey) URI {
	return URI{Wallet: wallet, Relays: relays, secret: secret}
}

// Secret returns the client secret key.
func (u URI) Secret() nostr.SecretKey { return u.secret }

// Client returns the client's public key.
func (u URI) Client() nostr.PubKey { return u.secret.Public() }

// ParseURI parses nostr+walletconnect://<wallet pubkey hex>?relay=…&secret=…
// (the public key may also be the path: nostr+walletconnect:<pubkey>?…).
// Errors describe what is wrong, never the secret.
func ParseURI(s string) (URI, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, Scheme+":")
	if !ok {
		return URI{}, fmt.Errorf("%w: it does not start with %s://", ErrInvalidURI, Scheme)
	}
	rest = strings.TrimPrefix(rest, "//")
	pub, query, _ := strings.Cut(rest, "?")
	pub = strings.Trim(pub, "/")
	if len(pub) != 64 {
		return URI{}, fmt.Errorf("%w: the wallet public key must be 64 hex characters (got %d)", ErrInvalidURI, len(pub))
	}
	pk, err := nostr.PubKeyFromHex(strings.ToLower(pub))
	if err != nil {
		return URI{}, fmt.Errorf("%w: the wallet public key is not a valid hex public key", ErrInvalidURI)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return URI{}, fmt.Errorf("%w: malformed query string", ErrInvalidURI)
	}
	u := URI{Wallet: pk, LUD16: q.Get("lud16")}
	for _, r := range q["relay"] {
		if r = nostrx.NormalizeRelayURL(r); r != "" {
			u.Relays = append(u.Relays, r)
		}
	}
	if len(u.Relays) == 0 {
		return URI{}, fmt.Errorf("%w: no relay= parameter", ErrInvalidURI)
	}
	secrets := q["secret"]
	if len(secrets) != 1 {
		return URI{}, fmt.Errorf("%w: want exactly one secret= parameter, got %d", ErrInvalidURI, len(secrets))
	}
	sk, err := nostrx.ParseSecretKey(secrets[0])
	if err != nil {
		// nostrx errors never include the key.
		return URI{}, fmt.Errorf("%w: secret: %v", ErrInvalidURI, err)
	}
	u.secret = sk
	return u, nil
}

func (u URI) encode(secret string) string {
	q := url.Values{"relay": u.Relays}
	q.Set("secret", secret)
	if u.LUD16 != "" {
		q.Set("lud16", u.LUD16)
	}
	// url.Values.Encode sorts keys: relay, secret, lud16 order is not kept,
	// which does not matter to a parser.
	return Scheme + "://" + u.Wallet.Hex() + "?" + q.Encode()
}

// String returns the URI with its secret redacted.
func (u URI) String() string { return u.encode("REDACTED") }

// GoString is String, so that %#v does not print the secret either.
func (u URI) GoString() string { return u.String() }

// Reveal returns the full URI, secret included.
func (u URI) Reveal() string { return u.encode(u.secret.Hex()) }
