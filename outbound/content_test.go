package outbound

import "testing"

func TestAccepts(t *testing.T) {
	json := []string{"application/json", "application/*+json"}
	for _, c := range []struct {
		patterns []string
		mt       string
		want     bool
	}{
		{json, "application/json", true},
		{json, "application/did+json", true},
		{json, "application/ld+json", true},
		{json, "application/+json", false},
		{json, "application/jsonp", false},
		{json, "text/json", false},
		{json, "text/html", false},
		{json, "", false},
		{[]string{"image/*"}, "image/png", true},
		{[]string{"image/*"}, "image/", false},
		{[]string{"image/*"}, "text/plain", false},
		{[]string{"IMAGE/PNG"}, "image/png", true},
	} {
		if got := accepts(c.patterns, c.mt); got != c.want {
			t.Errorf("accepts(%q, %q) = %v", c.patterns, c.mt, got)
		}
	}
	if h := acceptHeader(json); h != "application/json" {
		t.Errorf("Accept header %q", h)
	}
}
