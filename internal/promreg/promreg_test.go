package promreg

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRegistriesAreSeparate(t *testing.T) {
	a, b := New(), New()
	a.Counter("cvm_test_total", "a test counter").Add(2)
	b.Counter("cvm_test_total", "a test counter").Add(5)
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "cvm_test_total 2") || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("metrics:\n%s", body)
	}
}
