package tests

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/regen-s3/regen"

// allowedImports lists, for each package of ours, which of our packages it
// may import directly. This is the architecture's one-way arrows as a test:
// pure cores (codec, placement) import nothing of ours, metadata only
// pebble, and nothing imports gateway, repair or shardserver but cmd and
// tests.
var allowedImports = map[string][]string{
	"codec":              {},
	"metadata":           {},
	"internal/placement": {},
	"internal/cluster":   {},
	"internal/sigv4":     {},
	"internal/netlimit":  {},
	"internal/s3bench":   {},
	"internal/s3policy":  {},
	"internal/connguard": {},
	"internal/sse":       {},
	"internal/pause":     {},
	"internal/shardrpc":  {"metadata", "internal/pause"},
	"internal/stripe":    {"codec", "metadata", "internal/shardrpc"},
	"shardserver":        {"codec", "metadata", "internal/shardrpc", "internal/cluster", "internal/placement", "internal/stripe", "internal/connguard"},
	"gateway":            {"codec", "metadata", "internal/shardrpc", "internal/cluster", "internal/placement", "internal/stripe", "internal/sigv4", "internal/s3policy", "internal/connguard", "internal/sse", "internal/pause"},
	"repair":             {"codec", "metadata", "internal/shardrpc", "internal/cluster", "internal/placement", "internal/stripe", "internal/pause"},
	"internal/chaos":     {"internal/cluster", "internal/sigv4", "internal/pause"},
}

func TestImportArrows(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if strings.HasPrefix(pkg, "cmd/") || pkg == "tests" || strings.HasPrefix(pkg, "tests/") {
			continue
		}
		top := pkg
		allowed, known := allowedImports[top]
		for !known && strings.Contains(top, "/") {
			// Sub-packages (e.g. gateway/ui) follow their parent's rules,
			// and may import their parent.
			top = top[:strings.LastIndex(top, "/")]
			allowed, known = allowedImports[top]
			if known {
				allowed = append(allowed, top)
			}
		}
		if !known {
			t.Errorf("package %s has no entry in allowedImports: add one that keeps the arrows one-way", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			ours, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			permitted := false
			for _, a := range allowed {
				if ours == a || strings.HasPrefix(ours, a+"/") || strings.HasPrefix(ours, pkg+"/") {
					permitted = true
				}
			}
			if !permitted {
				t.Errorf("%s imports %s, which the architecture forbids (allowed: %v)", pkg, ours, allowed)
			}
		}
	}
}
