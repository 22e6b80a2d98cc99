package gateway

import (
	"context"
	"encoding/xml"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

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

// TestVersionDue: the pure rule of NoncurrentVersionExpiration and
// ExpiredObjectDeleteMarker over one key's versions, newest first.
func TestVersionDue(t *testing.T) {
	day := 24 * time.Hour
	at := func(d int) time.Time { return time.Date(2026, 3, 1+d, 12, 0, 0, 0, time.UTC) }
	v := func(d int, deleted bool) metadata.ListEntry {
		return metadata.ListEntry{Key: "k", Modified: at(d), Deleted: deleted, Size: 1}
	}
	// Written on days 0, 1, 5 and 6 (current).
	vs := []metadata.ListEntry{v(6, false), v(5, false), v(1, false), v(0, false)}
	nc := []metadata.LifecycleRule{{ID: "nc", Enabled: true, NoncurrentDays: 2}}
	newer := []metadata.LifecycleRule{{ID: "n", Enabled: true, NoncurrentDays: 1, NewerNoncurrentVersions: 2}}
	tagged := []metadata.LifecycleRule{{ID: "t", Enabled: true, NoncurrentDays: 1, Tags: []metadata.LifecycleTag{{Key: "a", Value: "b"}}}}
	dm := []metadata.LifecycleRule{{ID: "dm", Enabled: true, Prefix: "k", ExpiredObjectDeleteMarker: true}}
	for _, c := range []struct {
		name  string
		rules []metadata.LifecycleRule
		vs    []metadata.ListEntry
		i     int
		tags  map[string]string
		now   time.Time
		want  bool
	}{
		{"current never by NoncurrentDays", nc, vs, 0, nil, at(100), false},
		// The version of day 1 became noncurrent on day 5: due two days
		// later rounded up to midnight (the end of day 7), not two days
		// after its own date.
		{"noncurrent counts from the next version", nc, vs, 2, nil, at(4), false},
		{"noncurrent not due a second early", nc, vs, 2, nil, at(7).Add(12*time.Hour - time.Second), false},
		{"noncurrent due", nc, vs, 2, nil, at(7).Add(12 * time.Hour), true},
		{"oldest due", nc, vs, 3, nil, at(4), true},
		{"the newest noncurrent waits for the current's date", nc, vs, 1, nil, at(7), false},
		{"two newer noncurrent kept: the newest", newer, vs, 1, nil, at(100), false},
		{"two newer noncurrent kept: the second", newer, vs, 2, nil, at(100), false},
		{"two newer noncurrent kept: the third goes", newer, vs, 3, nil, at(100), true},
		{"tag filter: untagged stays", tagged, vs, 3, nil, at(100), false},
		{"tag filter: tagged goes", tagged, vs, 3, map[string]string{"a": "b"}, at(100), true},
		{"disabled", []metadata.LifecycleRule{{ID: "off", NoncurrentDays: 1}}, vs, 3, nil, at(100), false},
		{"prefix elsewhere", []metadata.LifecycleRule{{ID: "p", Enabled: true, Prefix: "x/", NoncurrentDays: 1}}, vs, 3, nil, at(100), false},
		{"lone delete marker", dm, []metadata.ListEntry{v(1, true)}, 0, nil, at(1), true},
		{"delete marker over a version", dm, []metadata.ListEntry{v(1, true), v(0, false)}, 0, nil, at(100), false},
		{"lone object is no marker", dm, []metadata.ListEntry{v(1, false)}, 0, nil, at(100), false},
		{"noncurrent delete marker", nc, []metadata.ListEntry{v(6, false), v(1, true), v(0, false)}, 1, nil, at(9), true},
	} {
		if got := versionDue(c.rules, c.vs, c.i, c.tags, c.now, day); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

// putVersionAt writes a version of bucket/key modified at mod on the
// first nine servers of its order (a versioned PUT, or a delete marker).
func putVersionAt(g *Gateway, f *fakeManifests, bucket, key string, mod time.Time, deleted bool, edit func(*metadata.Manifest)) *metadata.Manifest {
	m := putVersionFake(g, f, bucket, key, "data of "+key, deleted)
	f.mu.Lock()
	defer f.mu.Unlock()
	m.Modified = mod // every fake server holds this manifest
	if edit != nil {
		edit(m)
	}
	return m
}

// TestLifecycleRemovesVersions: a pass over a versioned bucket (the
// fake shard servers, a clock of its own) removes the noncurrent versions
// and lone delete markers its rules say are due, and nothing else: not a
// version with too few days noncurrent, not one of the newer ones kept,
// not one under a legal hold or retention, not one without the rule's
// tag, not a marker over a version, not a current version.
func TestLifecycleRemovesVersions(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	day := 24 * time.Hour
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(d int) time.Time { return t0.Add(time.Duration(d) * day) }
	ids := func(key string) []string {
		vs, err := g.layer.keyVersions(ctx, "b", key)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range vs {
			out = append(out, v.VersionID)
		}
		return out
	}
	put := func(key string, d int, edit func(*metadata.Manifest)) string {
		return putVersionAt(g, f, "b", key, at(d), false, edit).VersionID
	}
	// old/k: written on days 0, 1 and 4; a version goes 2 days after the
	// next one was written.
	put("old/k", 0, nil)
	o1, o2 := put("old/k", 1, nil), put("old/k", 4, nil)
	// newer/k: five versions; the two newest noncurrent ones stay.
	var n []string
	for d := range 5 {
		n = append(n, put("newer/k", d, nil))
	}
	// lock/k: noncurrent versions under a legal hold and a retention.
	l0 := put("lock/k", 0, func(m *metadata.Manifest) { m.Lock = &metadata.Lock{LegalHold: true} })
	l1 := put("lock/k", 0, func(m *metadata.Manifest) {
		m.Lock = &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: at(100)}
	})
	l2 := put("lock/k", 1, nil)
	// tag/k: of two noncurrent versions, the tagged one goes.
	put("tag/k", 0, func(m *metadata.Manifest) { m.Tags = map[string]string{"gone": "yes"} })
	t1id := put("tag/k", 0, nil)
	t2id := put("tag/k", 1, nil)
	// dm/k: a version under a delete marker; other/k: under no rule.
	dv := put("dm/k", 0, nil)
	dmID := putVersionAt(g, f, "b", "dm/k", at(1), true, nil).VersionID
	x0, x1 := put("other/k", 0, nil), put("other/k", 1, nil)

	b := metadata.Bucket{Name: "b", Versioning: metadata.VersioningEnabled, Lifecycle: []metadata.LifecycleRule{
		{ID: "old", Enabled: true, Prefix: "old/", NoncurrentDays: 2},
		{ID: "newer", Enabled: true, Prefix: "newer/", NoncurrentDays: 1, NewerNoncurrentVersions: 2},
		{ID: "lock", Enabled: true, Prefix: "lock/", NoncurrentDays: 1},
		{ID: "tag", Enabled: true, Prefix: "tag/", Tags: []metadata.LifecycleTag{{Key: "gone", Value: "yes"}}, NoncurrentDays: 1},
		{ID: "dm", Enabled: true, Prefix: "dm/", ExpiredObjectDeleteMarker: true},
	}}
	s := newLifecycleService(g, nil)
	s.limit = rate.NewLimiter(rate.Inf, 1)
	now := at(5)
	s.now = func() time.Time { return now }
	s.expireObjects(ctx, &b)
	for key, want := range map[string][]string{
		"old/k":   {o2, o1}, // o1 noncurrent since day 4: due on day 6
		"newer/k": {n[4], n[3], n[2]},
		"lock/k":  {l2, l1, l0},
		"tag/k":   {t2id, t1id},
		"dm/k":    {dmID, dv},
		"other/k": {x1, x0},
	} {
		if got := ids(key); !slices.Equal(got, want) {
			t.Errorf("day 5: versions of %s %v, want %v", key, got, want)
		}
	}
	if st := s.Status(); st.Noncurrent != 4 || st.Markers != 0 || st.Errors != 0 {
		t.Errorf("day 5: status %+v, want 4 noncurrent versions expired (o0, n0, n1, t0), no errors", st)
	}

	// Day 6: o1 is due. The version under dm/k's marker is removed by
	// ID, which leaves the marker alone: it goes.
	if _, err := g.layer.deleteVersion(ctx, "b", "dm/k", dv); err != nil {
		t.Fatal(err)
	}
	now = at(6)
	s.expireObjects(ctx, &b)
	if got := ids("old/k"); !slices.Equal(got, []string{o2}) {
		t.Errorf("day 6: versions of old/k %v, want the current one only", got)
	}
	if got := ids("dm/k"); len(got) != 0 {
		t.Errorf("day 6: dm/k keeps %v, want its lone delete marker removed", got)
	}
	if got := ids("lock/k"); !slices.Equal(got, []string{l2, l1, l0}) {
		t.Errorf("day 6: versions of lock/k %v, want the locked ones kept", got)
	}
	if st := s.Status(); st.Noncurrent != 5 || st.Markers != 1 || st.Errors != 0 {
		t.Errorf("day 6: status %+v, want 5 noncurrent versions expired, 1 delete marker removed, no errors", st)
	}
}
