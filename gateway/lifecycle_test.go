package gateway

import (
	"context"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// lifecycleDoc wraps rules in a LifecycleConfiguration document.
func lifecycleDoc(rules ...string) string {
	return `<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + strings.Join(rules, "") + `</LifecycleConfiguration>`
}

func TestLifecycleRulesValidation(t *testing.T) {
	exp := `<Expiration><Days>3</Days></Expiration>`
	for _, c := range []struct {
		name, doc, code string
	}{
		{"prefix filter", lifecycleDoc(`<Rule><ID>a</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status>` + exp + `</Rule>`), ""},
		{"legacy prefix", lifecycleDoc(`<Rule><ID>a</ID><Prefix>logs/</Prefix><Status>Enabled</Status>` + exp + `</Rule>`), ""},
		{"empty filter", lifecycleDoc(`<Rule><ID>a</ID><Filter></Filter><Status>Disabled</Status>` + exp + `</Rule>`), ""},
		{"tag filter", lifecycleDoc(`<Rule><ID>a</ID><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status>` + exp + `</Rule>`), ""},
		{"and filter", lifecycleDoc(`<Rule><ID>a</ID><Filter><And><Prefix>p</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value>w</Value></Tag></And></Filter><Status>Enabled</Status>` + exp + `</Rule>`), ""},
		{"date", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule>`), ""},
		{"abort and noncurrent", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload><NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>`), ""},
		{"delete marker", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`), ""},
		{"no rules", lifecycleDoc(), "MalformedXML"},
		{"bad status", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>On</Status>` + exp + `</Rule>`), "MalformedXML"},
		{"duplicate id", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status>`+exp+`</Rule>`, `<Rule><ID>a</ID><Filter/><Status>Enabled</Status>`+exp+`</Rule>`), "InvalidArgument"},
		{"long id", lifecycleDoc(`<Rule><ID>` + strings.Repeat("x", 256) + `</ID><Filter/><Status>Enabled</Status>` + exp + `</Rule>`), "InvalidArgument"},
		{"zero days", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><Days>0</Days></Expiration></Rule>`), "InvalidArgument"},
		{"negative abort days", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>-1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`), "InvalidArgument"},
		{"date not midnight", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration></Rule>`), "InvalidArgument"},
		{"days and date", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule>`), "MalformedXML"},
		{"no action", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status></Rule>`), "InvalidRequest"},
		{"no filter", lifecycleDoc(`<Rule><ID>a</ID><Status>Enabled</Status>` + exp + `</Rule>`), "MalformedXML"},
		{"filter and prefix", lifecycleDoc(`<Rule><ID>a</ID><Prefix>x</Prefix><Filter/><Status>Enabled</Status>` + exp + `</Rule>`), "MalformedXML"},
		{"two filter conditions", lifecycleDoc(`<Rule><ID>a</ID><Filter><Prefix>p</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status>` + exp + `</Rule>`), "MalformedXML"},
		{"abort with tag", lifecycleDoc(`<Rule><ID>a</ID><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`), "InvalidRequest"},
		{"transition", lifecycleDoc(`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition></Rule>`), "NotImplemented"},
	} {
		var in lifecycleInput
		if err := parseXML([]byte(c.doc), &in); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := lifecycleRules(&in)
		got := ""
		var ae *APIError
		if errors.As(err, &ae) {
			got = ae.Code
		} else if err != nil {
			got = err.Error()
		}
		if got != c.code {
			t.Errorf("%s: error %q (%v), want %q", c.name, got, err, c.code)
		}
	}
}

// A configuration reads back as put (the ID generated when missing).
func TestLifecycleRoundTrip(t *testing.T) {
	doc := lifecycleDoc(
		`<Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule>`,
		`<Rule><ID>both</ID><Filter><And><Prefix>p</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Disabled</Status><Expiration><Date>2030-01-01T00:00:00.000Z</Date></Expiration></Rule>`,
		`<Rule><ID>tag</ID><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
		`<Rule><ID>all</ID><Filter></Filter><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>`,
		`<Rule><ID>old</ID><Prefix></Prefix><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`,
	)
	var in lifecycleInput
	if err := parseXML([]byte(doc), &in); err != nil {
		t.Fatal(err)
	}
	rules, err := lifecycleRules(&in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := xml.Marshal(lifecycleXML(rules))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != doc {
		t.Errorf("read back\n%s\nwant\n%s", out, doc)
	}
	in = lifecycleInput{}
	if err := parseXML([]byte(lifecycleDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)), &in); err != nil {
		t.Fatal(err)
	}
	if rules, err := lifecycleRules(&in); err != nil || len(rules[0].ID) == 0 {
		t.Errorf("a rule without an ID: %v, %+v", err, rules)
	}
}

func TestObjectExpires(t *testing.T) {
	day := 24 * time.Hour
	mod := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	rules := []metadata.LifecycleRule{
		{ID: "logs", Enabled: true, Prefix: "logs/", ExpirationDays: 2},
		{ID: "tmp", Enabled: true, Tags: []metadata.LifecycleTag{{Key: "tmp", Value: "yes"}}, ExpirationDays: 1},
		{ID: "off", Enabled: false, Prefix: "off/", ExpirationDays: 1},
		{ID: "date", Enabled: true, Prefix: "dated/", ExpirationDate: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{ID: "big", Enabled: true, Prefix: "big/", SizeGreaterThan: 100, ExpirationDays: 1},
	}
	tmp := map[string]string{"tmp": "yes"}
	for _, c := range []struct {
		key  string
		size int64
		tags map[string]string
		now  time.Time
		want bool
	}{
		// Days: modified + 2 days, rounded up to midnight UTC (Mar 13 00:00).
		{"logs/a", 1, nil, time.Date(2026, 3, 12, 23, 59, 0, 0, time.UTC), false},
		{"logs/a", 1, nil, time.Date(2026, 3, 13, 0, 0, 0, 0, time.UTC), true},
		{"other/a", 1, nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"other/a", 1, tmp, time.Date(2026, 3, 12, 0, 0, 0, 0, time.UTC), true},
		{"other/a", 1, map[string]string{"tmp": "no"}, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"off/a", 1, nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"dated/a", 1, nil, time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC), false},
		{"dated/a", 1, nil, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), true},
		{"big/a", 100, nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"big/a", 101, nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
	} {
		if got := objectExpires(rules, c.key, c.size, c.tags, mod, c.now, day); got != c.want {
			t.Errorf("%s size %d tags %v at %s: expires %v, want %v", c.key, c.size, c.tags, c.now, got, c.want)
		}
	}
	// A one-second day, as tests use it.
	short := []metadata.LifecycleRule{{ID: "s", Enabled: true, ExpirationDays: 2, AbortDays: 1}}
	base := time.Unix(1000, 500e6)
	if objectExpires(short, "k", 1, nil, base, base.Add(2*time.Second), time.Second) {
		t.Error("expired before the rounded-up due time")
	}
	if !objectExpires(short, "k", 1, nil, base, time.Unix(1003, 0), time.Second) {
		t.Error("not expired at the due time")
	}
	if uploadExpires(short, "k", base, time.Unix(1001, 0), time.Second) || !uploadExpires(short, "k", base, time.Unix(1002, 0), time.Second) {
		t.Error("upload abort not due at initiation + 1 day rounded up")
	}
}

// noBuckets is a ShardAPI whose servers cannot be reached.
type noBuckets struct{ ShardAPI }

func (noBuckets) ListBuckets(context.Context, string) ([]metadata.Bucket, error) {
	return nil, errors.New("connection refused")
}

// A lifecycle pass while the shard servers are not up (a cluster
// starting) waits instead of failing: no error counted, and admin status
// shows the pass as skipped.
func TestLifecycleWaitsForShardServers(t *testing.T) {
	g := uiGateway(t) // its one shard server is dead
	g.layer.shards = noBuckets{}
	g.lifecycle.pass(t.Context())
	g.lifecycle.pass(t.Context())
	st := g.status(t.Context()).Lifecycle
	if st.Errors != 0 || st.Waiting != 2 || st.Passes != 0 {
		t.Fatalf("lifecycle status with no live shard server: %+v, want 2 passes waiting and no errors", st)
	}
}
