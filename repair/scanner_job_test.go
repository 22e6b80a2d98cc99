package repair

import (
	"testing"
	"unsafe"

	"github.com/regen-s3/regen/metadata"
)

// TestJobOfOwnsItsStrings: a queued job shares no string with the
// manifest it was made from, whose strings share the buffer of the whole
// decoded record; the version's writer included.
func TestJobOfOwnsItsStrings(t *testing.T) {
	m := &metadata.Manifest{Bucket: "bucket", Key: "some/key", Version: metadata.Version{TS: 7, Writer: "gw-1"},
		Placement: []string{"a", "b", "c"}}
	j := jobOf(m, false, 1, []int{2})
	for _, c := range []struct{ name, got, from string }{
		{"bucket", j.bucket, m.Bucket}, {"key", j.key, m.Key}, {"writer", j.version.Writer, m.Version.Writer},
	} {
		if c.got != c.from {
			t.Fatalf("%s: %q, want %q", c.name, c.got, c.from)
		}
		if unsafe.StringData(c.got) == unsafe.StringData(c.from) {
			t.Errorf("the job's %s shares the manifest's memory", c.name)
		}
	}
	if j.version != m.Version || !j.inline || j.width != 3 || j.parts != 1 || len(j.lost) != 1 {
		t.Fatalf("job %+v does not describe the manifest", j)
	}
}
