package quotation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxBody bounds the body the middleware reads.
const maxBody = 4 << 20

// Capability is the value of experimental.nip10 in an initialize result.
var Capability = map[string][]string{"auth": {"DIDAuthV1"}, "payment": {"quotation"}}

// HTTP puts a Desk in front of an MCP streamable HTTP endpoint: it is a
// gateway.HTTPPayments.
type HTTP struct {
	Desk *Desk
	// Caller is the DID the auth middleware verified for the request.
	Caller func(ctx context.Context) (did string, ok bool)
	// Channels, when set, offers prepaid payment channels (channel.PMI):
	// deposits quoted and confirmed like prices open them, priced calls
	// carry receipts (channel.Header), cep8.MethodChannelClose refunds.
	// Set it only when the server's wallet may pay refunds.
	Channels *channel.Books
	// CallerKey is the key the auth middleware verified the request with
	// (didauth.CallerKey): a channel is that key's, its receipts signed by
	// it. Required with Channels.
	CallerKey func(ctx context.Context) (didauth.Key, bool)
}

func (h HTTP) caller(ctx context.Context) string {
	if h.Caller == nil {
		return ""
	}
	did, _ := h.Caller(ctx)
	return did
}

// Middleware answers nip10/quote and nip10/confirm, and lets a priced
// tools/call through only with a paid quotation for exactly that call,
// which it spends. Everything else passes unchanged. Its answers are
// JSON-RPC responses with HTTP 200; a batch holding a priced tools/call is
// refused with 400 (a batch cannot be paid for call by call).
func (h HTTP) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			httpserve.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "the request body is over the size limit or could not be read")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
			if h.batchHasPaidCall(trimmed) {
				httpserve.WriteError(w, http.StatusBadRequest, "batch_paid_call", "a priced tools/call cannot be sent in a batch: send it alone, with its quotation")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !req.IsCall() {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		switch req.Method {
		case MethodQuote:
			var dp depositParams
			if h.Channels != nil && json.Unmarshal(req.Params, &dp) == nil && dp.Channel != nil {
				h.quoteDeposit(w, r, req, dp)
				return
			}
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := json.Unmarshal(req.Params, &p); err != nil || p.Name == "" {
				answer(w, req.ID, nil, fmt.Errorf("%w: want {name, arguments}", ErrInvalidInput))
				return
			}
			q, err := h.Desk.Quote(ctx, h.caller(ctx), p.Name, p.Arguments)
			answer(w, req.ID, q, err)
		case MethodConfirm:
			var p struct {
				ID    string `json:"quotation_id"`
				Proof string `json:"payment_proof"`
			}
			if err := json.Unmarshal(req.Params, &p); err != nil {
				answer(w, req.ID, nil, fmt.Errorf("%w: want {quotation_id, payment_proof}", ErrInvalidInput))
				return
			}
			h.confirm(w, r, req, p.ID, p.Proof)
		case cep8.MethodChannelClose:
			if h.Channels == nil {
				next.ServeHTTP(w, r)
				return
			}
			h.closeChannel(w, r, req)
		case "tools/call":
			name, args, quotation, err := callParams(req.Params)
			if errors.Is(err, errAmbiguous) {
				httpserve.WriteError(w, http.StatusBadRequest, "ambiguous_params", "tools/call params hold a key that differs from name, arguments or _meta only in case")
				return
			}
			if err != nil {
				// Not a call of a tool by name: MCP answers it.
				next.ServeHTTP(w, r)
				return
			}
			price, priced := h.Desk.Priced(name)
			if !priced {
				next.ServeHTTP(w, r)
				return
			}
			if h.Channels != nil && quotation == "" && r.Header.Get(channel.Header) != "" {
				h.byReceipt(w, r, req, price, next)
				return
			}
			if quotation == "" {
				data := map[string]any{"quote_method": MethodQuote, "confirm_method": MethodConfirm, "meta_key": MetaQuotation, "price": capPrice(price)}
				if h.Channels != nil {
					data[DataChannelPMI] = channel.PMI
				}
				writeResponse(w, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
					Code: CodeQuotationRequired, Message: ErrRequired.Error(), Data: mustJSON(data),
				}})
				return
			}
			caller := h.caller(ctx)
			if err := h.Desk.Spend(ctx, caller, quotation, name, args); err != nil {
				answer(w, req.ID, nil, err)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r)
			if sw.status >= 300 {
				// MCP's transport refuses a request with an HTTP error only
				// before it hands the request on (a header it rejects, a
				// duplicate id): the call did not run.
				if err := h.Desk.Release(context.WithoutCancel(ctx), caller, quotation); err != nil {
					h.Desk.opts.Logger.Error("quotation: a paid call refused before MCP kept its quotation spent", "quotation", clip(quotation), "status", sw.status, "err", err)
				}
			}
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// statusWriter notes the final status written through it (informational
// ones aside); a body written without one is a 200.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets the transport stream its answer (SSE) through the writer.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (h HTTP) batchHasPaidCall(body []byte) bool {
	var msgs []json.RawMessage
	if json.Unmarshal(body, &msgs) != nil {
		return false
	}
	for _, m := range msgs {
		var r struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(m, &r) != nil || r.Method != "tools/call" {
			continue
		}
		name, _, _, err := callParams(r.Params)
		if errors.Is(err, errAmbiguous) {
			return true
		}
		if _, priced := h.Desk.Priced(name); err == nil && priced {
			return true
		}
	}
	return false
}

// errAmbiguous is a tools/call whose params hold a key that differs from
// name, arguments or _meta only in case: JSON decoders disagree on which
// wins (Go's match keys without regard to case, JavaScript's do not), so
// the middleware and the upstream could read different tools.
var errAmbiguous = errors.New("ambiguous params")

// callParams reads a tools/call's name, arguments and quotation id, by
// exact keys.
func callParams(params json.RawMessage) (name string, args json.RawMessage, quotation string, err error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return "", nil, "", err
	}
	for k := range p {
		for _, known := range []string{"name", "arguments", "_meta"} {
			if k != known && strings.EqualFold(k, known) {
				return "", nil, "", errAmbiguous
			}
		}
	}
	if err := json.Unmarshal(p["name"], &name); err != nil || name == "" {
		return "", nil, "", fmt.Errorf("tools/call without a name")
	}
	var meta map[string]json.RawMessage
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return "", nil, "", fmt.Errorf("tools/call: _meta is not an object")
	}
	if raw, ok := meta[MetaQuotation]; ok && json.Unmarshal(raw, &quotation) != nil {
		return "", nil, "", fmt.Errorf("tools/call: _meta[%q] is not a string", MetaQuotation)
	}
	return name, p["arguments"], quotation, nil
}

func answer(w http.ResponseWriter, id jsonrpc.ID, result any, err error) {
	if err != nil {
		writeResponse(w, mcpmsg.ErrorResponse(id, Code(err), "%v", err))
		return
	}
	writeResponse(w, &jsonrpc.Response{ID: id, Result: mustJSON(result)})
}

func writeResponse(w http.ResponseWriter, resp *jsonrpc.Response) {
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		httpserve.WriteError(w, http.StatusInternalServerError, "internal", "could not encode the answer")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this package, which marshal
	}
	return b
}

// Annotate adds experimental.nip10 to an initialize result and each
// priced tool's price (_meta["nip10/price"]) to a tools/list result. A
// result it cannot read passes unchanged.
func (h HTTP) Annotate(method string, result json.RawMessage) json.RawMessage {
	switch method {
	case mcpmsg.MethodInitialize:
		if h.Channels != nil {
			return addCapability(result, channelCapability)
		}
		return AddCapability(result)
	case "tools/list":
		out, err := h.addPrices(result)
		if err != nil {
			return result
		}
		return out
	}
	return result
}

// AddCapability adds experimental.nip10 to an initialize result.
func AddCapability(result json.RawMessage) json.RawMessage {
	return addCapability(result, Capability)
}

// channelCapability is Capability with channels: channel.PMI among the
// payment methods.
var channelCapability = map[string][]string{"auth": {"DIDAuthV1"}, "payment": {"quotation", channel.PMI}}

func addCapability(result json.RawMessage, capability map[string][]string) json.RawMessage {
	var res map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil {
		return result
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(res["capabilities"], &caps) != nil || caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var exp map[string]json.RawMessage
	if json.Unmarshal(caps["experimental"], &exp) != nil || exp == nil {
		exp = map[string]json.RawMessage{}
	}
	exp[CapabilityName] = mustJSON(capability)
	caps["experimental"] = mustJSON(exp)
	res["capabilities"] = mustJSON(caps)
	return mustJSON(res)
}

// toolPrice is a price as a tool's _meta[MetaPrice] carries it: amount,
// and max for a range, as JSON numbers. A usd price is the decimal the
// operator wrote (0.05); any other is whole sats, rounded up, as it
// always was, so that a client reading integers still reads it.
type toolPrice struct {
	Amount float64 `json:"amount"`
	Max    float64 `json:"max,omitempty"`
	Unit   string  `json:"unit"`
}

// capPrice is an announced price as tools carry it.
func capPrice(c payments.Cap) toolPrice {
	lo, hi := c.Low, c.High
	if c.Unit != payments.UnitUSD {
		lo, hi = math.Ceil(lo), math.Ceil(hi)
	}
	p := toolPrice{Amount: lo, Unit: c.Unit}
	if hi > lo {
		p.Max = hi
	}
	return p
}

func (h HTTP) addPrices(result json.RawMessage) (json.RawMessage, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, err
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		return nil, err
	}
	for _, t := range tools {
		var name string
		if json.Unmarshal(t["name"], &name) != nil {
			continue
		}
		c, ok := h.Desk.Priced(name)
		if !ok {
			continue
		}
		var meta map[string]json.RawMessage
		if json.Unmarshal(t["_meta"], &meta) != nil || meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[MetaPrice] = mustJSON(capPrice(c))
		t["_meta"] = mustJSON(meta)
	}
	res["tools"] = mustJSON(tools)
	return mustJSON(res), nil
}
