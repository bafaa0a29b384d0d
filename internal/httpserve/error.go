package httpserve

import (
	"encoding/json"
	"net/http"
)

// WriteError answers a request refused before it reaches what the server
// serves, with status and the JSON body {"code", "message"} that every cvm
// HTTP endpoint refuses with: code is stable for programs, message says
// what to do. < and > stay readable in the message (no HTML escaping):
// the body is JSON, never HTML.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, message})
}
