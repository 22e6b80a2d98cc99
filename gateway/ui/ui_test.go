package ui

import (
	"strings"
	"testing"
)

func TestAsset(t *testing.T) {
	for _, tc := range []struct {
		name, ctype string
		ok          bool
	}{
		{"", "text/html; charset=utf-8", true},
		{"index.html", "text/html; charset=utf-8", true},
		{"app.js", "text/javascript; charset=utf-8", true},
		{"app.css", "text/css; charset=utf-8", true},
		{"../ui.go", "", false},
		{"static/app.js", "", false},
		{"nope.js", "", false},
	} {
		b, ct, ok := Asset(tc.name)
		if ok != tc.ok || ct != tc.ctype || (ok && len(b) == 0) {
			t.Errorf("Asset(%q) = %d bytes, %q, %v; want %q, %v", tc.name, len(b), ct, ok, tc.ctype, tc.ok)
		}
	}
	page, _, _ := Asset("")
	for _, ref := range []string{"app.js", "app.css"} {
		if !strings.Contains(string(page), ref) {
			t.Errorf("index.html does not load %s", ref)
		}
	}
}
