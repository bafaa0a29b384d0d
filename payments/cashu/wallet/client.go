package wallet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

// maxResponse bounds a mint's answer: a keyset's keys (64 of them) or the
// signatures of a swap fit in far less.
const maxResponse = 1 << 20

// ErrMintURL reports a mint URL the wallet will not speak to.
var ErrMintURL = errors.New("cashu wallet: unusable mint URL")

// NormalizeMintURL is the form of a mint URL the wallet keys its files
// and compares tokens by: lower-case scheme and host, no trailing slash,
// no query or fragment. Plain http is accepted on loopback only (cvm
// mint-sim, tests): elsewhere proofs would cross the network in clear.
func NormalizeMintURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: %q is not an http(s) URL", ErrMintURL, raw)
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	switch u.Scheme {
	case "https":
	case "http":
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", fmt.Errorf("%w: %s is plain http off loopback; a mint is reached over https", ErrMintURL, u.Host)
		}
	default:
		return "", fmt.Errorf("%w: scheme %q, want https (or http on loopback)", ErrMintURL, u.Scheme)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: a mint URL has no user, query or fragment", ErrMintURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// Client speaks a mint's HTTP API (NUT-01 to NUT-07). Its errors carry
// the mint's *cashu.Error when the mint answered with one; none carries a
// proof, an output or a token.
type Client struct {
	url  string
	http *http.Client
}

// NewClient returns a client of the mint at mintURL (normalized, see
// NormalizeMintURL); hc nil uses a client with a 30 s timeout.
func NewClient(mintURL string, hc *http.Client) (*Client, error) {
	u, err := NormalizeMintURL(mintURL)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{url: u, http: hc}, nil
}

// URL is the mint's normalized URL.
func (c *Client) URL() string { return c.url }

// Info is GET /v1/info (NUT-06).
func (c *Client) Info(ctx context.Context) (cashu.MintInfo, error) {
	var out cashu.MintInfo
	return out, c.do(ctx, "info", http.MethodGet, "/v1/info", nil, &out)
}

// Keysets is GET /v1/keysets (NUT-02).
func (c *Client) Keysets(ctx context.Context) (cashu.KeysetsResponse, error) {
	var out cashu.KeysetsResponse
	return out, c.do(ctx, "keysets", http.MethodGet, "/v1/keysets", nil, &out)
}

// Keys is GET /v1/keys/{id} (NUT-01).
func (c *Client) Keys(ctx context.Context, id string) (cashu.KeysResponse, error) {
	var out cashu.KeysResponse
	return out, c.do(ctx, "keys", http.MethodGet, "/v1/keys/"+url.PathEscape(id), nil, &out)
}

// MintQuote is POST /v1/mint/quote/bolt11 (NUT-04).
func (c *Client) MintQuote(ctx context.Context, req cashu.MintQuoteBolt11Request) (cashu.MintQuoteBolt11Response, error) {
	var out cashu.MintQuoteBolt11Response
	return out, c.do(ctx, "mint quote", http.MethodPost, "/v1/mint/quote/bolt11", req, &out)
}

// MintQuoteState is GET /v1/mint/quote/bolt11/{quote} (NUT-04).
func (c *Client) MintQuoteState(ctx context.Context, quote string) (cashu.MintQuoteBolt11Response, error) {
	var out cashu.MintQuoteBolt11Response
	return out, c.do(ctx, "mint quote state", http.MethodGet, "/v1/mint/quote/bolt11/"+url.PathEscape(quote), nil, &out)
}

// Mint is POST /v1/mint/bolt11 (NUT-04).
func (c *Client) Mint(ctx context.Context, req cashu.MintBolt11Request) (cashu.MintBolt11Response, error) {
	var out cashu.MintBolt11Response
	return out, c.do(ctx, "mint", http.MethodPost, "/v1/mint/bolt11", req, &out)
}

// Swap is POST /v1/swap (NUT-03).
func (c *Client) Swap(ctx context.Context, req cashu.SwapRequest) (cashu.SwapResponse, error) {
	var out cashu.SwapResponse
	return out, c.do(ctx, "swap", http.MethodPost, "/v1/swap", req, &out)
}

// CheckState is POST /v1/checkstate (NUT-07).
func (c *Client) CheckState(ctx context.Context, ys []string) (cashu.CheckStateResponse, error) {
	var out cashu.CheckStateResponse
	return out, c.do(ctx, "checkstate", http.MethodPost, "/v1/checkstate", cashu.CheckStateRequest{Ys: ys}, &out)
}

// do sends one request and decodes the answer: out on 200, a *cashu.Error
// when the mint sent one, else an error naming the status. Errors name the
// operation op, not the path (a quote id is in some) nor the body (proofs,
// outputs).
func (c *Client) do(ctx context.Context, op, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without the request's URL
		}
		return fmt.Errorf("cashu mint %s: %s: %w", c.url, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("cashu mint %s: %s: %w", c.url, op, err)
	}
	if len(data) > maxResponse {
		return fmt.Errorf("cashu mint %s: %s: answer over %d bytes", c.url, op, maxResponse)
	}
	if resp.StatusCode != http.StatusOK {
		var me cashu.Error
		if json.Unmarshal(data, &me) == nil && (me.Code != 0 || me.Detail != "") {
			return fmt.Errorf("cashu mint %s: %s: %w", c.url, op, &me)
		}
		return fmt.Errorf("cashu mint %s: %s: HTTP %d", c.url, op, resp.StatusCode)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cashu mint %s: %s: malformed answer: %w", c.url, op, err)
	}
	return nil
}
