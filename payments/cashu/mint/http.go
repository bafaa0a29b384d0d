package mint

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cvmgo/cvm/payments/cashu"
)

// maxBody bounds a request body: DefaultMaxProofs proofs with DLEQ proofs
// are some 400 KB of JSON.
const maxBody = 1 << 20

// Handler serves the mint's HTTP API (NUT-01 to 07, NUT-23 bolt11) on the
// paths the NUTs name. A request the mint refuses is answered 400 with a
// NUT error body {detail, code}; a failure of the mint's own, 500 with a
// generic detail (the cause goes to the log).
func (m *Mint) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, r *http.Request) { m.reply(w, r, m.Info(), nil) })
	mux.HandleFunc("GET /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		m.reply(w, r, cashu.KeysResponse{Keysets: []cashu.KeysetKeys{m.keys()}}, nil)
	})
	mux.HandleFunc("GET /v1/keys/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != m.ks.pub.ID {
			m.reply(w, r, nil, cashu.Errorf(cashu.CodeKeysetUnknown, "keyset is not known"))
			return
		}
		m.reply(w, r, cashu.KeysResponse{Keysets: []cashu.KeysetKeys{m.keys()}}, nil)
	})
	mux.HandleFunc("GET /v1/keysets", func(w http.ResponseWriter, r *http.Request) {
		m.reply(w, r, cashu.KeysetsResponse{Keysets: []cashu.KeysetInfo{m.ks.info()}}, nil)
	})
	mux.HandleFunc("POST /v1/swap", post(m, m.Swap))
	mux.HandleFunc("POST /v1/checkstate", post(m, m.CheckState))
	mux.HandleFunc("POST /v1/mint/quote/bolt11", post(m, m.MintQuote))
	mux.HandleFunc("GET /v1/mint/quote/bolt11/{quote}", get(m, m.GetMintQuote))
	mux.HandleFunc("POST /v1/mint/bolt11", post(m, m.MintTokens))
	mux.HandleFunc("POST /v1/melt/quote/bolt11", post(m, m.MeltQuote))
	mux.HandleFunc("GET /v1/melt/quote/bolt11/{quote}", get(m, m.GetMeltQuote))
	mux.HandleFunc("POST /v1/melt/bolt11", post(m, m.Melt))
	return mux
}

func (m *Mint) keys() cashu.KeysetKeys {
	return cashu.KeysetKeys{ID: m.ks.pub.ID, Unit: m.ks.pub.Unit, Keys: m.ks.pub.WireKeys()}
}

// post adapts a method taking a JSON body.
func post[Req, Resp any](m *Mint, f func(context.Context, Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		if err := dec.Decode(&req); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				m.reply(w, r, nil, cashu.Errorf(CodeMalformed, "request body over %d bytes", maxBody))
				return
			}
			// The decoder's message may quote the body (a secret): not sent.
			m.reply(w, r, nil, cashu.Errorf(CodeMalformed, "request body is not the JSON this endpoint takes"))
			return
		}
		resp, err := f(r.Context(), req)
		m.reply(w, r, resp, err)
	}
}

// get adapts a method taking the {quote} of the path.
func get[Resp any](m *Mint, f func(context.Context, string) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		resp, err := f(r.Context(), r.PathValue("quote"))
		m.reply(w, r, resp, err)
	}
}

func (m *Mint) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	status := http.StatusOK
	if err != nil {
		var ce *cashu.Error
		if errors.As(err, &ce) {
			status, v = http.StatusBadRequest, ce
			m.log.Debug("mint: refused", "path", r.URL.Path, "code", ce.Code, "detail", ce.Detail)
		} else {
			status, v = http.StatusInternalServerError, cashu.Errorf(CodeMalformed, "internal error")
			m.log.Error("mint: request failed", "path", r.URL.Path, "error", err)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a write error means the client left
}
