package catalogpage

import (
	"bufio"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/cvmgo/cvm/discovery"
)

// The steps of a call, as the page is told them (the "step" of a line).
const (
	stepCalling = "calling" // finding the server on its relays and reaching it
	stepWaiting = "waiting" // the request is sent; waiting for the result
	stepPaying  = "paying"  // the server asked for a payment; the wallet pays it
	stepPaid    = "paid"    // paid; waiting for the result
)

// payee names who a payment goes to, as the page shows it.
type payee struct {
	Name string `json:"name"`
	Npub string `json:"npub"`
}

type paymentLine struct {
	Amount int64  `json:"amount"`
	Unit   string `json:"unit"`
	To     payee  `json:"to"`
}

// callStream writes how a call goes to the page, one JSON line at a time,
// each flushed at once: {"step":…} as the call reaches each step (with
// "payment" for paying and paid), {"progress":…}, and last {"result":…} or
// {"error":…}. It is the Reporter of that call.
type callStream struct {
	mu   sync.Mutex
	w    *bufio.Writer
	fl   http.Flusher // nil if the connection cannot flush
	to   payee
	done bool // the outcome is written: nothing more is
}

func newCallStream(w http.ResponseWriter, server discovery.Server) *callStream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return &callStream{w: bufio.NewWriter(w), fl: fl, to: payee{Name: server.Name, Npub: server.Npub}}
}

func (s *callStream) line(v any, last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = last
	b, _ := json.Marshal(v)
	s.w.Write(append(b, '\n'))
	s.w.Flush()
	if s.fl != nil {
		s.fl.Flush()
	}
}

func (s *callStream) step(name string, p *Payment) {
	line := map[string]any{"step": name}
	if p != nil {
		line["payment"] = paymentLine{Amount: p.Amount, Unit: p.Unit, To: s.to}
	}
	s.line(line, false)
}

func (s *callStream) Sent()               { s.step(stepWaiting, nil) }
func (s *callStream) Paying(p Payment)    { s.step(stepPaying, &p) }
func (s *callStream) Paid(p Payment)      { s.step(stepPaid, &p) }
func (s *callStream) Progress(p Progress) { s.line(map[string]any{"progress": p}, false) }

// stream runs the call, telling the page how it goes.
func (p *Page) stream(w http.ResponseWriter, r *http.Request, req CallRequest, server discovery.Server) {
	cs := newCallStream(w, server)
	cs.step(stepCalling, nil)
	p.log.Info("try it", "server", req.Server.Hex(), "tool", req.Tool, "max_pay", req.MaxPay)
	res, err := p.opts.Caller.Call(r.Context(), req, cs)
	if err != nil {
		p.log.Info("try it failed", "server", req.Server.Hex(), "tool", req.Tool, "err", err)
		cs.line(map[string]any{"error": err.Error()}, true)
		return
	}
	cs.line(map[string]any{"result": res}, true)
}
