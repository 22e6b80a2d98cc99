package tests

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	lc "github.com/minio/minio-go/v7/pkg/lifecycle"
)

// TestBucketLifecycle puts a lifecycle configuration with minio-go on a
// cluster whose lifecycle day is one second: objects under the rule's
// prefix or with its tag expire, the others stay, an incomplete upload
// under the abort rule's prefix is aborted, and the configuration reads
// back until it is deleted.
func TestBucketLifecycle(t *testing.T) {
	parallel(t)
	d := startDev(t, "--lifecycle-day", "1s", "--lifecycle-interval", "1s")
	c := d.client(t)
	core := &minio.Core{Client: c}
	mustMakeBucket(t, c, "life")

	cfg := lc.NewConfiguration()
	cfg.Rules = []lc.Rule{
		{ID: "tmp", Status: "Enabled", RuleFilter: lc.Filter{Prefix: "tmp/"}, Expiration: lc.Expiration{Days: 1}},
		{ID: "tagged", Status: "Enabled", RuleFilter: lc.Filter{Tag: lc.Tag{Key: "expire", Value: "yes"}}, Expiration: lc.Expiration{Days: 1}},
		{ID: "uploads", Status: "Enabled", RuleFilter: lc.Filter{Prefix: "mpu/"}, AbortIncompleteMultipartUpload: lc.AbortIncompleteMultipartUpload{DaysAfterInitiation: 1}},
		{ID: "off", Status: "Disabled", RuleFilter: lc.Filter{Prefix: "keep/"}, Expiration: lc.Expiration{Days: 1}},
	}
	if err := c.SetBucketLifecycle(ctx(t), "life", cfg); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketLifecycle(ctx(t), "life")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rules) != 4 || got.Rules[0].ID != "tmp" || got.Rules[0].RuleFilter.Prefix != "tmp/" || got.Rules[0].Expiration.Days != 1 ||
		got.Rules[1].RuleFilter.Tag.Key != "expire" || got.Rules[2].AbortIncompleteMultipartUpload.DaysAfterInitiation != 1 || got.Rules[3].Status != "Disabled" {
		t.Fatalf("configuration read back: %+v", got.Rules)
	}

	data := randomData(10<<10, 51)
	for _, o := range []struct {
		key  string
		tags map[string]string
	}{
		{"tmp/a", nil}, {"tmp/b/c", nil}, {"tagged", map[string]string{"expire": "yes"}},
		{"keep/a", nil}, {"untagged", map[string]string{"expire": "no"}}, {"tmpx", nil},
	} {
		put(t, c, "life", o.key, data, minio.PutObjectOptions{UserTags: o.tags})
	}
	if _, err := core.NewMultipartUpload(ctx(t), "life", "mpu/big", minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	keep, err := core.NewMultipartUpload(ctx(t), "life", "other/big", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}

	keys := func() map[string]bool {
		out := map[string]bool{}
		for o := range c.ListObjects(ctx(t), "life", minio.ListObjectsOptions{Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			out[o.Key] = true
		}
		return out
	}
	uploads := func() map[string]bool {
		out := map[string]bool{}
		for u := range c.ListIncompleteUploads(ctx(t), "life", "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			out[u.Key] = true
		}
		return out
	}
	waitFor(t, 60*time.Second, "expired objects and upload to go", func() bool {
		k, u := keys(), uploads()
		return !k["tmp/a"] && !k["tmp/b/c"] && !k["tagged"] && !u["mpu/big"]
	})
	// Had the others been selected, a pass begun since would have taken
	// them too: two more passes end, and the second began after this read
	// (the first may have been under way), two ticks of the 1 s interval
	// after the pass that took the last expired one.
	passes := d.adminStatus(t).Lifecycle.Passes
	waitFor(t, 60*time.Second, "two more lifecycle passes", func() bool { return d.adminStatus(t).Lifecycle.Passes >= passes+2 })
	if k := keys(); len(k) != 3 || !k["keep/a"] || !k["untagged"] || !k["tmpx"] {
		t.Errorf("objects left: %v; want keep/a, untagged and tmpx", k)
	}
	if u := uploads(); len(u) != 1 || !u["other/big"] {
		t.Errorf("uploads left: %v; want other/big (%s)", u, keep)
	}
	// regen admin status reports the service, as it reports repair. The
	// passes began while the shard servers were still starting: those
	// waited, they are not errors.
	admin := func(args ...string) string {
		all := append([]string{"admin"}, append(args, "--endpoint", d.info.Endpoint, "--access-key", d.info.AccessKey, "--secret-key", d.info.SecretKey)...)
		out, err := exec.Command(regenBin, all...).CombinedOutput()
		if err != nil {
			t.Fatalf("regen %v: %v\n%s", all, err, out)
		}
		return string(out)
	}
	var st struct {
		Lifecycle struct {
			Passes, Expired, Aborted, Errors int64
			LastRun                          time.Time `json:"last_run"`
		} `json:"lifecycle"`
	}
	if err := json.Unmarshal([]byte(admin("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if l := st.Lifecycle; l.Passes == 0 || l.Expired < 3 || l.Aborted < 1 || l.Errors != 0 || l.LastRun.IsZero() {
		t.Errorf("admin status --json lifecycle: %+v; want passes, 3 expired, 1 aborted, no errors", l)
	}
	if text := admin("status"); !strings.Contains(text, "lifecycle (this gateway): last pass") || !strings.Contains(text, "errors 0") {
		t.Errorf("admin status shows no lifecycle line with no errors:\n%s", text)
	}

	if err := c.SetBucketLifecycle(ctx(t), "life", lc.NewConfiguration()); err != nil { // DELETE ?lifecycle
		t.Fatal(err)
	}
	if _, err := c.GetBucketLifecycle(ctx(t), "life"); minio.ToErrorResponse(err).Code != "NoSuchLifecycleConfiguration" {
		t.Errorf("GET of a deleted lifecycle configuration: %v; want NoSuchLifecycleConfiguration", err)
	}
}

// TestLifecycleNoncurrentVersions puts versions and rules with minio-go
// on a cluster whose lifecycle day is one second: NoncurrentVersionExpiration
// removes the old versions of a versioned bucket (the newest noncurrent
// one kept where NewerNoncurrentVersions says so), ExpiredObjectDeleteMarker
// removes a delete marker left with nothing under it, the versions no rule
// selects stay for later passes, and admin status counts what was removed.
func TestLifecycleNoncurrentVersions(t *testing.T) {
	parallel(t)
	d := startDev(t, "--lifecycle-day", "1s", "--lifecycle-interval", "1s")
	c := d.client(t)
	mustMakeBucket(t, c, "lifever")
	if err := c.EnableVersioning(ctx(t), "lifever"); err != nil {
		t.Fatal(err)
	}
	data := randomData(10<<10, 52)
	var current string
	for range 3 {
		current = put(t, c, "lifever", "old/k", data, minio.PutObjectOptions{}).VersionID
	}
	var kept []string
	for range 3 {
		kept = append(kept, put(t, c, "lifever", "keep1/k", data, minio.PutObjectOptions{}).VersionID)
	}
	for range 2 {
		put(t, c, "lifever", "zz/k", data, minio.PutObjectOptions{})
	}
	dv := put(t, c, "lifever", "dm/k", data, minio.PutObjectOptions{}).VersionID
	if err := c.RemoveObject(ctx(t), "lifever", "dm/k", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveObject(ctx(t), "lifever", "dm/k", minio.RemoveObjectOptions{VersionID: dv}); err != nil {
		t.Fatal(err)
	}

	cfg := lc.NewConfiguration()
	cfg.Rules = []lc.Rule{
		{ID: "old", Status: "Enabled", RuleFilter: lc.Filter{Prefix: "old/"}, NoncurrentVersionExpiration: lc.NoncurrentVersionExpiration{NoncurrentDays: 1}},
		{ID: "keep1", Status: "Enabled", RuleFilter: lc.Filter{Prefix: "keep1/"}, NoncurrentVersionExpiration: lc.NoncurrentVersionExpiration{NoncurrentDays: 1, NewerNoncurrentVersions: 1}},
		{ID: "dm", Status: "Enabled", RuleFilter: lc.Filter{Prefix: "dm/"}, Expiration: lc.Expiration{DeleteMarker: true}},
	}
	if err := c.SetBucketLifecycle(ctx(t), "lifever", cfg); err != nil {
		t.Fatal(err)
	}
	versions := func(key string) []string {
		var out []string
		for _, v := range listVersions(t, c, "lifever", key) {
			out = append(out, v.VersionID)
		}
		return out
	}
	waitFor(t, 60*time.Second, "noncurrent versions and the lone delete marker to go", func() bool {
		return len(versions("old/k")) == 1 && len(versions("keep1/k")) == 2 && len(versions("dm/k")) == 0
	})
	if got := versions("old/k"); got[0] != current {
		t.Errorf("old/k keeps %v, want its current version %s", got, current)
	}
	if got := versions("keep1/k"); !slices.Equal(got, []string{kept[2], kept[1]}) {
		t.Errorf("keep1/k keeps %v, want the current version and the newest noncurrent one %v", got, kept[1:])
	}
	// Two whole passes after that: had zz/k been selected, its old
	// version would be gone by now too.
	from := d.adminStatus(t).Lifecycle.Passes
	waitFor(t, 60*time.Second, "two more lifecycle passes", func() bool { return d.adminStatus(t).Lifecycle.Passes >= from+2 })
	if got := versions("zz/k"); len(got) != 2 {
		t.Errorf("zz/k, under no rule, keeps %v; want both versions", got)
	}
	if l := d.adminStatus(t).Lifecycle; l.Noncurrent < 3 || l.Markers < 1 || l.Errors != 0 {
		t.Errorf("admin status lifecycle: %+v; want 3 noncurrent versions expired, 1 delete marker removed, no errors", l)
	}
}
