package httpserve

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusUnauthorized, "auth_missing", "sign with <DIDAuthV1>")
	if w.Code != http.StatusUnauthorized || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	if got, want := w.Body.String(), `{"code":"auth_missing","message":"sign with <DIDAuthV1>"}`+"\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
}
