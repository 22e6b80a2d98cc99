package tests

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	lc "github.com/minio/minio-go/v7/pkg/lifecycle"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/sigv4"
	"github.com/regen-s3/regen/metadata"
)

// lockCode is the S3 error code of err ("" for none).
func lockCode(err error) string {
	if err == nil {
		return ""
	}
	return minio.ToErrorResponse(err).Code
}

// TestObjectLock runs S3 object lock as a backup tool meets it, with
// minio-go against regen dev: a bucket created with object lock, a
// default retention, versions put with GOVERNANCE and COMPLIANCE
// retention and legal holds, every route that could remove a locked
// version refused (DELETE by version, DeleteObjects, lifecycle), the
// governance bypass for the bucket's owner only, virtual-hosted
// requests, and the locks read back with three shard servers killed.
func TestObjectLock(t *testing.T) {
	parallel(t)
	d := startDev(t, "--lifecycle-day", "1s", "--lifecycle-interval", "1s", "--domain", "s3.test")
	c := d.client(t)
	if err := c.MakeBucket(ctx(t), "locked", minio.MakeBucketOptions{ObjectLocking: true}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := c.GetBucketVersioning(ctx(t), "locked"); err != nil || cfg.Status != "Enabled" {
		t.Fatalf("versioning of a lock bucket: %+v %v; want Enabled", cfg, err)
	}
	if err := c.SuspendVersioning(ctx(t), "locked"); lockCode(err) != "InvalidBucketState" {
		t.Fatalf("suspending a lock bucket's versioning: %v; want InvalidBucketState", err)
	}
	if enabled, mode, _, _, err := c.GetObjectLockConfig(ctx(t), "locked"); err != nil || enabled != "Enabled" || mode != nil {
		t.Fatalf("lock configuration of a new lock bucket: %q %v %v", enabled, mode, err)
	}
	mustMakeBucket(t, c, "plain")
	if _, _, _, _, err := c.GetObjectLockConfig(ctx(t), "plain"); lockCode(err) != "ObjectLockConfigurationNotFoundError" {
		t.Fatalf("lock configuration of a plain bucket: %v", err)
	}
	gov, comp := minio.Governance, minio.Compliance
	day, days := uint(1), minio.Days
	if err := c.SetObjectLockConfig(ctx(t), "plain", &gov, &day, &days); lockCode(err) != "InvalidBucketState" {
		t.Fatalf("lock configuration put on a plain bucket: %v; want InvalidBucketState", err)
	}

	// A GOVERNANCE version: no removal by version, alone or in a batch;
	// an overwrite is a new version and a DELETE a marker, as in S3.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	v1, v2 := []byte("governed one"), bytes.Repeat([]byte("governed two "), 20000)
	// As in S3, a PUT asking for a lock carries a digest of its body.
	if _, err := c.PutObject(ctx(t), "locked", "gov", bytes.NewReader(v1), int64(len(v1)), minio.PutObjectOptions{Mode: gov, RetainUntilDate: until}); lockCode(err) != "InvalidRequest" {
		t.Fatalf("locked PUT without Content-MD5 or checksum: %v; want InvalidRequest", err)
	}
	id1 := put(t, c, "locked", "gov", v1, minio.PutObjectOptions{Mode: gov, RetainUntilDate: until, SendContentMd5: true}).VersionID
	if mode, date, err := c.GetObjectRetention(ctx(t), "locked", "gov", id1); err != nil || *mode != gov || !date.Equal(until) {
		t.Fatalf("retention of gov: %v %v %v; want GOVERNANCE until %s", mode, date, err, until)
	}
	if h := headers(t, d, "/locked/gov", nil); h.Get("x-amz-object-lock-mode") != "GOVERNANCE" ||
		h.Get("x-amz-object-lock-retain-until-date") != until.Format("2006-01-02T15:04:05.000Z") || h.Get("x-amz-object-lock-legal-hold") != "OFF" {
		t.Fatalf("HEAD of gov: lock headers %v", h)
	}
	if err := c.RemoveObject(ctx(t), "locked", "gov", minio.RemoveObjectOptions{VersionID: id1}); lockCode(err) != "AccessDenied" {
		t.Fatalf("DELETE of a retained version: %v; want AccessDenied", err)
	}
	batch := make(chan minio.ObjectInfo, 1)
	batch <- minio.ObjectInfo{Key: "gov", VersionID: id1}
	close(batch)
	refused := 0
	for e := range c.RemoveObjects(ctx(t), "locked", batch, minio.RemoveObjectsOptions{}) {
		if lockCode(e.Err) != "AccessDenied" {
			t.Errorf("DeleteObjects of a retained version: %v", e.Err)
		}
		refused++
	}
	if refused != 1 {
		t.Fatalf("DeleteObjects of a retained version: %d errors, want 1", refused)
	}
	id2 := put(t, c, "locked", "gov", v2, minio.PutObjectOptions{}).VersionID
	if err := c.RemoveObject(ctx(t), "locked", "gov", minio.RemoveObjectOptions{}); err != nil {
		t.Fatalf("DELETE (a delete marker) over a retained version: %v", err)
	}
	for id, want := range map[string][]byte{id1: v1, id2: v2} {
		if got := get(t, c, "locked", "gov", minio.GetObjectOptions{VersionID: id}); !bytes.Equal(got, want) {
			t.Errorf("version %s after overwrite and delete: %d bytes, want %d", id, len(got), len(want))
		}
	}

	// The bypass is the owner's: a key with write rights only cannot
	// shorten the retention or remove the version, the admin can.
	writer := createKey(t, d, "--name", "writer")
	if out, err := regenAdmin(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey, "key", "grant", "writer", "--bucket", "locked", "--right", "write"); err != nil {
		t.Fatalf("key grant: %v\n%s", err, out)
	}
	wc := s3Client(t, d.info.Endpoint, writer.AccessKey, writer.SecretKey)
	shorter := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)
	waitFor(t, 30*time.Second, "the writer's grant", func() bool {
		err := wc.RemoveObject(ctx(t), "locked", "gov", minio.RemoveObjectOptions{VersionID: id1, GovernanceBypass: true})
		return lockCode(err) == "AccessDenied" && strings.Contains(minio.ToErrorResponse(err).Message, "object lock")
	})
	if err := wc.PutObjectRetention(ctx(t), "locked", "gov", minio.PutObjectRetentionOptions{VersionID: id1, Mode: &gov, RetainUntilDate: &shorter, GovernanceBypass: true}); lockCode(err) == "" {
		t.Fatal("a writer shortened a GOVERNANCE retention with the bypass header")
	}
	// id1 is noncurrent now (v2 and a delete marker are above it): its
	// retention is updated all the same, in a newer manifest of id1.
	if err := c.PutObjectRetention(ctx(t), "locked", "gov", minio.PutObjectRetentionOptions{VersionID: id1, Mode: &gov, RetainUntilDate: &shorter}); lockCode(err) != "AccessDenied" {
		t.Fatalf("GOVERNANCE retention shortened without bypass: %v; want AccessDenied", err)
	}
	extended := until.Add(time.Hour)
	if err := c.PutObjectRetention(ctx(t), "locked", "gov", minio.PutObjectRetentionOptions{VersionID: id1, Mode: &gov, RetainUntilDate: &extended}); err != nil {
		t.Fatalf("GOVERNANCE retention of a noncurrent version extended: %v", err)
	}
	if mode, date, err := c.GetObjectRetention(ctx(t), "locked", "gov", id1); err != nil || *mode != gov || !date.Equal(extended) {
		t.Fatalf("retention of noncurrent id1 after extending: %v %v %v; want until %s", mode, date, err, extended)
	}
	if got := renderListing(listVersions(t, c, "locked", "gov"), map[string]string{id1: "v1", id2: "v2"}); !strings.HasSuffix(got, "gov:v2 gov:v1") || strings.Count(got, "gov:") != 3 {
		t.Fatalf("versions of gov after updating v1's retention: %q; want the marker, v2, v1 once each", got)
	}
	if got := get(t, c, "locked", "gov", minio.GetObjectOptions{VersionID: id1}); !bytes.Equal(got, v1) {
		t.Fatalf("v1 after its retention update: %q", got)
	}
	if err := c.RemoveObject(ctx(t), "locked", "gov", minio.RemoveObjectOptions{VersionID: id1, GovernanceBypass: true}); err != nil {
		t.Fatalf("DELETE of a GOVERNANCE version with the owner's bypass: %v", err)
	}
	if code, body := signedRequest(t, d, http.MethodGet, "/locked/gov?versionId="+id1, nil, nil); code != 404 || !strings.Contains(body, "NoSuchVersion") {
		t.Fatalf("version removed with bypass: %d %s; want 404 NoSuchVersion", code, body)
	}

	// COMPLIANCE: extended, never shortened or removed, bypass or not.
	cuntil := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	cdata := []byte("compliant")
	cid := put(t, c, "locked", "comp", cdata, minio.PutObjectOptions{Mode: comp, RetainUntilDate: cuntil, SendContentMd5: true}).VersionID
	earlier, later := cuntil.Add(-time.Hour), cuntil.Add(time.Hour)
	if err := c.PutObjectRetention(ctx(t), "locked", "comp", minio.PutObjectRetentionOptions{VersionID: cid, Mode: &comp, RetainUntilDate: &earlier, GovernanceBypass: true}); lockCode(err) != "AccessDenied" {
		t.Fatalf("COMPLIANCE shortened with bypass: %v; want AccessDenied", err)
	}
	if err := c.PutObjectRetention(ctx(t), "locked", "comp", minio.PutObjectRetentionOptions{VersionID: cid, Mode: &gov, RetainUntilDate: &later, GovernanceBypass: true}); lockCode(err) != "AccessDenied" {
		t.Fatalf("COMPLIANCE turned GOVERNANCE with bypass: %v; want AccessDenied", err)
	}
	if err := c.PutObjectRetention(ctx(t), "locked", "comp", minio.PutObjectRetentionOptions{VersionID: cid, Mode: &comp, RetainUntilDate: &later}); err != nil {
		t.Fatalf("COMPLIANCE extended: %v", err)
	}
	if err := c.RemoveObject(ctx(t), "locked", "comp", minio.RemoveObjectOptions{VersionID: cid, GovernanceBypass: true}); lockCode(err) != "AccessDenied" {
		t.Fatalf("DELETE of a COMPLIANCE version with bypass: %v; want AccessDenied", err)
	}

	// A legal hold blocks removal until it is released.
	hid := put(t, c, "locked", "held", []byte("on hold"), minio.PutObjectOptions{LegalHold: minio.LegalHoldEnabled, SendContentMd5: true}).VersionID
	if st, err := c.GetObjectLegalHold(ctx(t), "locked", "held", minio.GetObjectLegalHoldOptions{VersionID: hid}); err != nil || *st != minio.LegalHoldEnabled {
		t.Fatalf("legal hold of held: %v %v", st, err)
	}
	if err := c.RemoveObject(ctx(t), "locked", "held", minio.RemoveObjectOptions{VersionID: hid, GovernanceBypass: true}); lockCode(err) != "AccessDenied" {
		t.Fatalf("DELETE of a held version: %v; want AccessDenied", err)
	}
	off := minio.LegalHoldDisabled
	if err := c.PutObjectLegalHold(ctx(t), "locked", "held", minio.PutObjectLegalHoldOptions{VersionID: hid, Status: &off}); err != nil {
		t.Fatalf("legal hold released: %v", err)
	}
	if err := c.RemoveObject(ctx(t), "locked", "held", minio.RemoveObjectOptions{VersionID: hid}); err != nil {
		t.Fatalf("DELETE after the hold was released: %v", err)
	}
	on := minio.LegalHoldEnabled
	kid := put(t, c, "locked", "kept", []byte("kept on hold"), minio.PutObjectOptions{}).VersionID
	if err := c.PutObjectLegalHold(ctx(t), "locked", "kept", minio.PutObjectLegalHoldOptions{VersionID: kid, Status: &on}); err != nil {
		t.Fatalf("legal hold put: %v", err)
	}

	// The default retention applies to versions that name none, and
	// lifecycle expiration only adds a delete marker over them.
	if err := c.SetObjectLockConfig(ctx(t), "locked", &gov, &day, &days); err != nil {
		t.Fatal(err)
	}
	if _, mode, v, u, err := c.GetObjectLockConfig(ctx(t), "locked"); err != nil || *mode != gov || *v != 1 || *u != minio.Days {
		t.Fatalf("default retention read back: %v %v %v %v", mode, v, u, err)
	}
	eid := put(t, c, "locked", "exp/a", []byte("expires"), minio.PutObjectOptions{}).VersionID
	if mode, date, err := c.GetObjectRetention(ctx(t), "locked", "exp/a", eid); err != nil || *mode != gov || date.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("default retention of exp/a: %v %v %v; want GOVERNANCE for a day", mode, date, err)
	}
	cfg := lc.NewConfiguration()
	cfg.Rules = []lc.Rule{{ID: "exp", Status: "Enabled", RuleFilter: lc.Filter{Prefix: "exp/"}, Expiration: lc.Expiration{Days: 1}}}
	if err := c.SetBucketLifecycle(ctx(t), "locked", cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "lifecycle expiration of exp/a", func() bool {
		_, err := c.StatObject(ctx(t), "locked", "exp/a", minio.StatObjectOptions{})
		return lockCode(err) == "NoSuchKey"
	})
	if got := get(t, c, "locked", "exp/a", minio.GetObjectOptions{VersionID: eid}); string(got) != "expires" {
		t.Fatalf("retained version after lifecycle expiration: %q", got)
	}

	// CopyObject and multipart uploads take the lock their request asks
	// for (a copy not its source's).
	cp, err := c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "locked", Object: "copy", Mode: comp, RetainUntilDate: cuntil},
		minio.CopySrcOptions{Bucket: "locked", Object: "comp", VersionID: cid})
	if err != nil {
		t.Fatal(err)
	}
	if mode, date, err := c.GetObjectRetention(ctx(t), "locked", "copy", cp.VersionID); err != nil || *mode != comp || !date.Equal(cuntil) {
		t.Errorf("retention of a copy: %v %v %v; want COMPLIANCE until %s", mode, date, err, cuntil)
	}
	core := &minio.Core{Client: c}
	upload, err := core.NewMultipartUpload(ctx(t), "locked", "mpu", minio.PutObjectOptions{LegalHold: minio.LegalHoldEnabled})
	if err != nil {
		t.Fatal(err)
	}
	part, err := core.PutObjectPart(ctx(t), "locked", "mpu", upload, 1, bytes.NewReader(cdata), int64(len(cdata)), minio.PutObjectPartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done, err := core.CompleteMultipartUpload(ctx(t), "locked", "mpu", upload, []minio.CompletePart{{PartNumber: 1, ETag: part.ETag}}, minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.GetObjectLegalHold(ctx(t), "locked", "mpu", minio.GetObjectLegalHoldOptions{VersionID: done.VersionID}); err != nil || *st != minio.LegalHoldEnabled {
		t.Errorf("legal hold of a multipart upload: %v %v", st, err)
	}
	if err := c.RemoveObject(ctx(t), "locked", "mpu", minio.RemoveObjectOptions{VersionID: done.VersionID, GovernanceBypass: true}); lockCode(err) != "AccessDenied" {
		t.Errorf("DELETE of a held multipart version: %v; want AccessDenied", err)
	}

	// Virtual-hosted style takes the same routes.
	vhost := func(method, path string) (int, []byte) {
		req, _ := http.NewRequest(method, d.info.Endpoint+path, nil)
		req.Host = "locked.s3.test:" + portOf(strings.TrimPrefix(d.info.Endpoint, "http://"))
		sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now(), "UNSIGNED-PAYLOAD")
		return send(t, http.DefaultClient, req)
	}
	if code, body := vhost(http.MethodGet, "/comp?retention&versionId="+cid); code != 200 || !strings.Contains(string(body), "<Mode>COMPLIANCE</Mode>") {
		t.Errorf("virtual-hosted GET ?retention: %d %s", code, body)
	}
	if code, body := vhost(http.MethodGet, "/?object-lock"); code != 200 || !strings.Contains(string(body), "<ObjectLockEnabled>Enabled</ObjectLockEnabled>") {
		t.Errorf("virtual-hosted GET ?object-lock: %d %s", code, body)
	}
	if code, body := vhost(http.MethodDelete, "/comp?versionId="+cid); code != 403 || !strings.Contains(string(body), "AccessDenied") {
		t.Errorf("virtual-hosted DELETE of a COMPLIANCE version: %d %s; want 403 AccessDenied", code, body)
	}

	// The locks live in the versions' manifests: with m = 3 shard
	// servers killed they read back exact, and still refuse removal.
	for i := range 3 {
		d.killShard(i)
	}
	if mode, date, err := c.GetObjectRetention(ctx(t), "locked", "comp", cid); err != nil || *mode != comp || !date.Equal(later) {
		t.Errorf("COMPLIANCE retention with 3 shard servers killed: %v %v %v; want until %s", mode, date, err, later)
	}
	if st, err := c.GetObjectLegalHold(ctx(t), "locked", "kept", minio.GetObjectLegalHoldOptions{VersionID: kid}); err != nil || *st != minio.LegalHoldEnabled {
		t.Errorf("legal hold with 3 shard servers killed: %v %v", st, err)
	}
	if err := c.RemoveObject(ctx(t), "locked", "kept", minio.RemoveObjectOptions{VersionID: kid}); lockCode(err) != "AccessDenied" {
		t.Errorf("DELETE of a held version with 3 shard servers killed: %v; want AccessDenied", err)
	}
	if got := get(t, c, "locked", "comp", minio.GetObjectOptions{VersionID: cid}); !bytes.Equal(got, cdata) {
		t.Errorf("COMPLIANCE version with 3 shard servers killed: %q", got)
	}
	// And the bucket cannot go while they exist.
	if code, body := signedRequest(t, d, http.MethodDelete, "/locked", nil, nil); code != http.StatusConflict || !strings.Contains(body, "BucketNotEmpty") {
		t.Errorf("DELETE of the lock bucket: %d %s; want 409 BucketNotEmpty", code, body)
	}
}

// TestObjectLockAtShardServers: object lock turned on for an existing
// versioned bucket (as S3 allows; refused for unversioned and suspended
// buckets), and enforced by the shard servers themselves: a client that
// holds the cluster secret and calls the shard API directly cannot remove
// a retained version (DeleteVersion on every server, with the bypass for
// COMPLIANCE), delete its shards, roll it back with an abort, or replace
// its manifest with one without its COMPLIANCE retention; the version
// reads back exact. The GOVERNANCE bypass is the shard API's to give.
func TestObjectLockAtShardServers(t *testing.T) {
	parallel(t)
	d := startDev(t, "--rollback-after", "2s")
	c := d.client(t)
	mustMakeBucket(t, c, "later")
	gov, comp := minio.Governance, minio.Compliance
	day, days := uint(1), minio.Days
	if err := c.SetObjectLockConfig(ctx(t), "later", &gov, &day, &days); lockCode(err) != "InvalidBucketState" {
		t.Fatalf("object lock on an unversioned bucket: %v; want InvalidBucketState", err)
	}
	if err := c.EnableVersioning(ctx(t), "later"); err != nil {
		t.Fatal(err)
	}
	if err := c.SuspendVersioning(ctx(t), "later"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetObjectLockConfig(ctx(t), "later", &gov, &day, &days); lockCode(err) != "InvalidBucketState" {
		t.Fatalf("object lock on a suspended bucket: %v; want InvalidBucketState", err)
	}
	if err := c.EnableVersioning(ctx(t), "later"); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("kept for years "), 70000) // a megabyte: shards, not inline
	before := put(t, c, "later", "doc", data, minio.PutObjectOptions{}).VersionID
	if err := c.SetObjectLockConfig(ctx(t), "later", &gov, &day, &days); err != nil {
		t.Fatalf("object lock on a versioned bucket: %v", err)
	}
	if enabled, mode, _, _, err := c.GetObjectLockConfig(ctx(t), "later"); err != nil || enabled != "Enabled" || mode == nil || *mode != gov {
		t.Fatalf("lock configuration after enabling: %q %v %v", enabled, mode, err)
	}
	if err := c.SuspendVersioning(ctx(t), "later"); lockCode(err) != "InvalidBucketState" {
		t.Fatalf("suspending versioning after object lock: %v; want InvalidBucketState", err)
	}
	// A version from before takes a retention now; a new one the default.
	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if err := c.PutObjectRetention(ctx(t), "later", "doc", minio.PutObjectRetentionOptions{VersionID: before, Mode: &comp, RetainUntilDate: &until}); err != nil {
		t.Fatalf("retention of a version written before object lock: %v", err)
	}
	after := put(t, c, "later", "doc", []byte("governed"), minio.PutObjectOptions{}).VersionID
	if mode, _, err := c.GetObjectRetention(ctx(t), "later", "doc", after); err != nil || *mode != gov {
		t.Fatalf("default retention of a version written after: %v %v", mode, err)
	}

	sc := shardrpc.New(d.info.Secret, nil)
	var addrs []string
	for _, s := range d.info.Shards {
		addrs = append(addrs, s.Addr)
	}
	removeAll := func(id string, bypass bool) (removed int) {
		for _, a := range addrs {
			n, err := sc.DeleteVersion(ctx(t), a, "later", "doc", id, shardrpc.NoLease, bypass)
			if err != nil && !errors.Is(err, shardrpc.ErrLocked) {
				t.Fatalf("DeleteVersion on %s: %v", a, err)
			}
			removed += n
		}
		return removed
	}
	if n := removeAll(before, false) + removeAll(before, true) + removeAll(after, false); n != 0 {
		t.Fatalf("the shard API removed %d manifests of retained versions", n)
	}
	var held *metadata.Manifest
	for _, a := range addrs {
		cur, prev, err := sc.GetManifestVersions(ctx(t), a, "later", "doc")
		if err != nil {
			continue
		}
		for _, m := range append(prev, cur) {
			if m.VersionID == before && (held == nil || held.Version.Less(m.Version)) {
				held = m
			}
		}
	}
	if held == nil || held.Lock == nil || held.Lock.Mode != "COMPLIANCE" || len(held.Parts) == 0 {
		t.Fatalf("the retained version's manifest: %+v", held)
	}
	weak := *held
	weak.Version, weak.Lock = metadata.Version{TS: held.Version.TS + 1, Writer: "intruder"}, nil
	for i, node := range held.Placement {
		for _, s := range d.info.Shards {
			if s.ID != node {
				continue
			}
			if err := sc.DeleteShard(ctx(t), s.Addr, held.Parts[0].ID, i); !errors.Is(err, shardrpc.ErrLocked) {
				t.Fatalf("DeleteShard %d of a retained version on %s: %v; want ErrLocked", i, node, err)
			}
			if _, _, err := sc.PutManifest(ctx(t), s.Addr, &weak); !errors.Is(err, shardrpc.ErrLocked) {
				t.Fatalf("PutManifest of the version without its COMPLIANCE retention on %s: %v; want ErrLocked", node, err)
			}
		}
	}
	// An abort rolls back a failed write only while it is fresh (the
	// writer's own, right after it failed); "after" is the current version.
	ver, err := metadata.ParseVersion(after)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the version to outlive --rollback-after", func() bool {
		return time.Since(time.Unix(0, ver.TS)) > 3*time.Second
	})
	for _, a := range addrs {
		if err := sc.AbortManifest(ctx(t), a, "later", "doc", ver); err != nil && !errors.Is(err, shardrpc.ErrLocked) {
			t.Fatalf("AbortManifest on %s: %v", a, err)
		}
	}
	if got := get(t, c, "later", "doc", minio.GetObjectOptions{VersionID: before}); !bytes.Equal(got, data) {
		t.Fatalf("the COMPLIANCE version after the shard API's attempts: %d bytes, want %d", len(got), len(data))
	}
	if got := get(t, c, "later", "doc", minio.GetObjectOptions{}); string(got) != "governed" {
		t.Fatalf("the current GOVERNANCE version after the shard API's attempts: %q", got)
	}
	if mode, date, err := c.GetObjectRetention(ctx(t), "later", "doc", before); err != nil || *mode != comp || !date.Equal(until) {
		t.Fatalf("retention after the shard API's attempts: %v %v %v", mode, date, err)
	}
	// GOVERNANCE yields to the bypass, through the shard API as through S3.
	if n := removeAll(after, true); n == 0 {
		t.Fatal("DeleteVersion with the bypass removed no GOVERNANCE manifest")
	}
}
