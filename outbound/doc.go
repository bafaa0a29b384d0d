// Package outbound fetches what strangers point cvm at: a URL that arrives
// in someone else's data (an announced server's picture, a signer's did:web
// document, a Lightning address's LNURL-pay endpoint; later a NIP-05
// lookup) is a request
// that person makes cvm send from inside the operator's network. A
// Fetcher sends it only to the public Internet, and bounds what it costs:
//
//   - addresses: every address dialled, after DNS and on every redirect, is
//     judged right before the socket connects (net.Dialer.Control), so a
//     name that resolves, or rebinds, to loopback, a private or CGNAT range,
//     link-local (169.254.169.254), unique-local, multicast, a documentation
//     or benchmarking range, or an IPv6 address carrying any of those, is
//     refused before a byte is sent (IsPublic says which are public);
//   - URLs: http and https only (HTTPSOnly: https only), no credentials,
//     at most MaxURLLength bytes, literal addresses judged up front
//     (CheckURL);
//   - redirects: not followed unless the request asks, then at most
//     Options.MaxRedirects, never in a loop, never from https to http, each
//     target held to the same rules;
//   - time: one deadline for the whole fetch, body included (a slow loris
//     ends there); size: a byte limit on the body, checked as it is read;
//   - type: the declared Content-Type must be one the request accepts; for
//     images, the bytes must also be a raster image.
//
// Every refusal wraps a sentinel error (ErrNotPublic, ErrTooLarge, …) for
// errors.Is. Get fetches a body; GetJSON decodes JSON from it; GetImage
// fetches a picture.
//
// Tests serve on loopback, which a Fetcher refuses: Options.Allow lists
// exact host:port addresses to let through, and Options.ExtraRoots trusts a
// test server's certificate. Package outboundtest builds such a Fetcher for
// httptest servers. There is no switch that allows private addresses
// wholesale.
//
// Files: fetcher.go (Options, Fetcher, Get: the dialer's check, redirects,
// limits), url.go (CheckURL), addr.go (IsPublic and the ranges it refuses),
// content.go (media types, GetJSON, GetImage), errors.go (the sentinels).
package outbound
