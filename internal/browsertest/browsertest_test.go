package browsertest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func personWithout(t *testing.T, require string) *recorder {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CVM_CHROMIUM", "")
	t.Setenv("CVM_REQUIRE_BROWSER", require)
	var b Browser
	defer b.Close()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Person(r, "nobody", 375, 800)
	}()
	<-done
	return r
}

// Without a browser the tests skip, saying how to run them; under
// CVM_REQUIRE_BROWSER=1 they fail.
func TestPerson_WithoutABrowser(t *testing.T) {
	if r := personWithout(t, ""); r.failed != "" || !strings.Contains(r.skipped, "apt-get install chromium") || !strings.Contains(r.skipped, "CVM_REQUIRE_BROWSER=1") {
		t.Errorf("without a browser: skipped %q, failed %q", r.skipped, r.failed)
	}
	if r := personWithout(t, "1"); r.skipped != "" || !strings.Contains(r.failed, "no Chromium found") {
		t.Errorf("required: skipped %q, failed %q", r.skipped, r.failed)
	}
}
