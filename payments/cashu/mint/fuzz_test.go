package mint

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cvmgo/cvm/payments/cashu"
)

// FuzzHandler_Swap posts arbitrary bodies to /v1/swap and /v1/checkstate:
// whatever comes in, the mint answers 200 or 400 with a NUT error body,
// never 500, and never panics.
func FuzzHandler_Swap(f *testing.F) {
	fx := newFixture(f, nil)
	proofs := fx.mint(f, 1, 2)
	outs := fx.outputs(f, 1, 2)
	seed, _ := json.Marshal(cashu.SwapRequest{Inputs: proofs, Outputs: cashu.Messages(outs)})
	f.Add(seed)
	f.Add([]byte(`{"inputs":[{"amount":1,"id":"00","secret":"","C":"02"}],"outputs":[]}`))
	y, _ := proofs[0].Y()
	f.Add([]byte(`{"Ys":["` + y + `"]}`))
	h := fx.m.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/swap", "/v1/checkstate"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
			if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
				t.Fatalf("%s answered %d: %s", path, rec.Code, rec.Body)
			}
			var e cashu.Error
			if rec.Code == http.StatusBadRequest && (json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Detail == "") {
				t.Fatalf("%s: 400 without a NUT error body: %s", path, rec.Body)
			}
		}
	})
}
