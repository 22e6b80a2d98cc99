package gateway

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// Bucket lifecycle rules as S3 has them: Put/Get/DeleteBucketLifecycle-
// Configuration store the rules in the bucket record; the lifecycle
// service (lifecycle_service.go) applies them (in a versioned bucket an
// expiration writes a delete marker; NoncurrentVersionExpiration and
// ExpiredObjectDeleteMarker remove versions for good). Transitions are
// refused: regen does not re-encode objects into another storage class
// in the background.

// maxLifecycleRules is S3's limit of rules per configuration.
const maxLifecycleRules = 1000

// maxLifecycleIDLen is S3's limit on a rule ID's length.
const maxLifecycleIDLen = 255

// LifecycleConfiguration is the PutBucketLifecycleConfiguration body and
// the GetBucketLifecycleConfiguration response.
type LifecycleConfiguration struct {
	XMLName xml.Name        `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LifecycleConfiguration"`
	Rules   []LifecycleRule `xml:"Rule"`
}

// lifecycleInput is the Put body as clients send it (with or without the
// namespace).
type lifecycleInput struct {
	XMLName xml.Name        `xml:"LifecycleConfiguration"`
	Rules   []LifecycleRule `xml:"Rule"`
}

// LifecycleRule is one Rule element.
type LifecycleRule struct {
	ID                             string                `xml:"ID,omitempty"`
	Filter                         *LifecycleFilter      `xml:"Filter"`
	Prefix                         *string               `xml:"Prefix"`
	Status                         string                `xml:"Status"`
	Expiration                     *LifecycleExpiration  `xml:"Expiration"`
	NoncurrentVersionExpiration    *NoncurrentExpiration `xml:"NoncurrentVersionExpiration"`
	AbortIncompleteMultipartUpload *AbortIncomplete      `xml:"AbortIncompleteMultipartUpload"`
	// Transitions are only read, to be refused.
	Transitions           []struct{} `xml:"Transition"`
	NoncurrentTransitions []struct{} `xml:"NoncurrentVersionTransition"`
}

// LifecycleFilter is a rule's Filter: at most one of its fields is set.
// An empty Filter applies the rule to every object.
type LifecycleFilter struct {
	Prefix                *string       `xml:"Prefix"`
	Tag                   *Tag          `xml:"Tag"`
	ObjectSizeGreaterThan *int64        `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64        `xml:"ObjectSizeLessThan"`
	And                   *LifecycleAnd `xml:"And"`
}

// LifecycleAnd combines a prefix, tags and size bounds; all must match.
type LifecycleAnd struct {
	Prefix                *string `xml:"Prefix"`
	Tags                  []Tag   `xml:"Tag"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
}

// LifecycleExpiration is a rule's Expiration: exactly one of its fields.
type LifecycleExpiration struct {
	Days                      *int    `xml:"Days"`
	Date                      *string `xml:"Date"`
	ExpiredObjectDeleteMarker *bool   `xml:"ExpiredObjectDeleteMarker"`
}

// NoncurrentExpiration is a rule's NoncurrentVersionExpiration.
type NoncurrentExpiration struct {
	NoncurrentDays          *int `xml:"NoncurrentDays"`
	NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions"`
}

// AbortIncomplete is a rule's AbortIncompleteMultipartUpload.
type AbortIncomplete struct {
	DaysAfterInitiation *int `xml:"DaysAfterInitiation"`
}

// positiveDays checks a day count S3 wants positive.
func positiveDays(v *int, name, action string) (int, error) {
	if v == nil {
		return 0, apiErr("MalformedXML", action+" needs "+name)
	}
	if *v <= 0 {
		return 0, apiErr("InvalidArgument", fmt.Sprintf("'%s' for %s action must be a positive integer", name, action))
	}
	return *v, nil
}

// lifecycleTags checks filter tags as S3 does (as object tags, keys unique).
func lifecycleTags(tags []Tag) ([]metadata.LifecycleTag, error) {
	out := make([]metadata.LifecycleTag, 0, len(tags))
	seen := map[string]bool{}
	for _, t := range tags {
		if err := checkTag(t.Key, t.Value); err != nil {
			return nil, err
		}
		if seen[t.Key] {
			return nil, apiErr("InvalidArgument", "Duplicate Tag Keys are not allowed.")
		}
		seen[t.Key] = true
		out = append(out, metadata.LifecycleTag{Key: t.Key, Value: t.Value})
	}
	return out, nil
}

// sizeBounds checks ObjectSizeGreaterThan / ObjectSizeLessThan.
func sizeBounds(gt, lt *int64, r *metadata.LifecycleRule) error {
	if gt != nil {
		if *gt < 0 {
			return apiErr("InvalidArgument", "ObjectSizeGreaterThan must be a non-negative integer")
		}
		r.SizeGreaterThan = *gt
	}
	if lt != nil {
		if *lt <= 0 {
			return apiErr("InvalidArgument", "ObjectSizeLessThan must be a positive integer")
		}
		r.SizeLessThan = *lt
	}
	if gt != nil && lt != nil && *gt >= *lt {
		return apiErr("InvalidArgument", "ObjectSizeGreaterThan must be less than ObjectSizeLessThan")
	}
	return nil
}

// lifecycleFilter reads a rule's Filter (or legacy Prefix) into r.
func lifecycleFilter(in *LifecycleRule, r *metadata.LifecycleRule) error {
	switch {
	case in.Filter != nil && in.Prefix != nil:
		return apiErr("MalformedXML", "a rule has either a Filter or a Prefix, not both")
	case in.Filter == nil && in.Prefix == nil:
		return apiErr("MalformedXML", "a rule needs a Filter or a Prefix")
	case in.Prefix != nil:
		r.Prefix, r.LegacyPrefix = *in.Prefix, true
		return nil
	}
	f := in.Filter
	n := 0
	for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.ObjectSizeGreaterThan != nil, f.ObjectSizeLessThan != nil, f.And != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return apiErr("MalformedXML", "a Filter holds one of Prefix, Tag, ObjectSizeGreaterThan, ObjectSizeLessThan and And; combine them with And")
	}
	var err error
	switch {
	case f.Prefix != nil:
		r.Prefix = *f.Prefix
	case f.Tag != nil:
		r.Tags, err = lifecycleTags([]Tag{*f.Tag})
	case f.And != nil:
		a := f.And
		if a.Prefix != nil {
			r.Prefix = *a.Prefix
		}
		if r.Tags, err = lifecycleTags(a.Tags); err != nil {
			return err
		}
		err = sizeBounds(a.ObjectSizeGreaterThan, a.ObjectSizeLessThan, r)
	default:
		err = sizeBounds(f.ObjectSizeGreaterThan, f.ObjectSizeLessThan, r)
	}
	return err
}

// parseLifecycleDate reads an Expiration Date: ISO 8601, at midnight UTC.
func parseLifecycleDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, err = time.Parse("2006-01-02", s)
	}
	if err != nil {
		return time.Time{}, apiErr("InvalidArgument", "'Date' must be in ISO 8601 format")
	}
	t = t.UTC()
	if !t.Equal(t.Truncate(24 * time.Hour)) {
		return time.Time{}, apiErr("InvalidArgument", "'Date' must be at midnight GMT")
	}
	return t, nil
}

// lifecycleAction reads a rule's actions into r.
func lifecycleAction(in *LifecycleRule, r *metadata.LifecycleRule) error {
	if len(in.Transitions) > 0 || len(in.NoncurrentTransitions) > 0 {
		return apiErr("NotImplemented", "regen does not implement lifecycle transitions")
	}
	if in.Expiration == nil && in.NoncurrentVersionExpiration == nil && in.AbortIncompleteMultipartUpload == nil {
		return apiErr("InvalidRequest", "At least one action needs to be specified in a rule")
	}
	var err error
	if e := in.Expiration; e != nil {
		n := 0
		for _, set := range []bool{e.Days != nil, e.Date != nil, e.ExpiredObjectDeleteMarker != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return apiErr("MalformedXML", "an Expiration holds exactly one of Days, Date and ExpiredObjectDeleteMarker")
		}
		switch {
		case e.Days != nil:
			if r.ExpirationDays, err = positiveDays(e.Days, "Days", "Expiration"); err != nil {
				return err
			}
		case e.Date != nil:
			if r.ExpirationDate, err = parseLifecycleDate(*e.Date); err != nil {
				return err
			}
		default:
			if len(r.Tags) > 0 {
				return apiErr("InvalidRequest", "ExpiredObjectDeleteMarker cannot be specified with tags.")
			}
			r.ExpiredObjectDeleteMarker = *e.ExpiredObjectDeleteMarker
		}
	}
	if nv := in.NoncurrentVersionExpiration; nv != nil {
		if r.NoncurrentDays, err = positiveDays(nv.NoncurrentDays, "NoncurrentDays", "NoncurrentVersionExpiration"); err != nil {
			return err
		}
		if v := nv.NewerNoncurrentVersions; v != nil {
			if *v <= 0 {
				return apiErr("InvalidArgument", "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a positive integer")
			}
			r.NewerNoncurrentVersions = *v
		}
	}
	if a := in.AbortIncompleteMultipartUpload; a != nil {
		if len(r.Tags) > 0 || r.SizeGreaterThan > 0 || r.SizeLessThan > 0 {
			return apiErr("InvalidRequest", "AbortIncompleteMultipartUpload cannot be specified with Tags or object size filters.")
		}
		if r.AbortDays, err = positiveDays(a.DaysAfterInitiation, "DaysAfterInitiation", "AbortIncompleteMultipartUpload"); err != nil {
			return err
		}
	}
	return nil
}

// newRuleID is the ID S3 gives a rule put without one.
func newRuleID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}

// lifecycleRules checks a configuration as S3 does and returns its rules.
func lifecycleRules(in *lifecycleInput) ([]metadata.LifecycleRule, error) {
	if len(in.Rules) == 0 || len(in.Rules) > maxLifecycleRules {
		return nil, apiErr("MalformedXML", fmt.Sprintf("A lifecycle configuration holds 1 to %d Rule elements", maxLifecycleRules))
	}
	out := make([]metadata.LifecycleRule, 0, len(in.Rules))
	ids := map[string]bool{}
	for i := range in.Rules {
		x := &in.Rules[i]
		r := metadata.LifecycleRule{ID: x.ID}
		if utf8.RuneCountInString(r.ID) > maxLifecycleIDLen {
			return nil, apiErr("InvalidArgument", fmt.Sprintf("ID length should not exceed allowed limit of %d", maxLifecycleIDLen))
		}
		if r.ID == "" {
			r.ID = newRuleID()
		}
		if ids[r.ID] {
			return nil, apiErr("InvalidArgument", "Rule ID must be unique. Found same ID for more than one rule")
		}
		ids[r.ID] = true
		switch x.Status {
		case "Enabled":
			r.Enabled = true
		case "Disabled":
		default:
			return nil, apiErr("MalformedXML", "Status is Enabled or Disabled")
		}
		if err := lifecycleFilter(x, &r); err != nil {
			return nil, err
		}
		if err := lifecycleAction(x, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// lifecycleXML renders stored rules as GetBucketLifecycleConfiguration
// returns them.
func lifecycleXML(rules []metadata.LifecycleRule) LifecycleConfiguration {
	out := LifecycleConfiguration{}
	for i := range rules {
		r := &rules[i]
		x := LifecycleRule{ID: r.ID, Status: "Disabled"}
		if r.Enabled {
			x.Status = "Enabled"
		}
		prefix := r.Prefix
		var tags []Tag
		for _, t := range r.Tags {
			tags = append(tags, Tag(t))
		}
		var gt, lt *int64
		if r.SizeGreaterThan > 0 {
			gt = &r.SizeGreaterThan
		}
		if r.SizeLessThan > 0 {
			lt = &r.SizeLessThan
		}
		conds := len(tags)
		for _, set := range []bool{prefix != "", gt != nil, lt != nil} {
			if set {
				conds++
			}
		}
		switch {
		case r.LegacyPrefix:
			x.Prefix = &prefix
		case conds > 1:
			a := &LifecycleAnd{Tags: tags, ObjectSizeGreaterThan: gt, ObjectSizeLessThan: lt}
			if prefix != "" {
				a.Prefix = &prefix
			}
			x.Filter = &LifecycleFilter{And: a}
		case len(tags) == 1:
			x.Filter = &LifecycleFilter{Tag: &tags[0]}
		case gt != nil || lt != nil:
			x.Filter = &LifecycleFilter{ObjectSizeGreaterThan: gt, ObjectSizeLessThan: lt}
		case prefix != "":
			x.Filter = &LifecycleFilter{Prefix: &prefix}
		default:
			x.Filter = &LifecycleFilter{}
		}
		switch {
		case r.ExpirationDays > 0:
			x.Expiration = &LifecycleExpiration{Days: &r.ExpirationDays}
		case !r.ExpirationDate.IsZero():
			d := r.ExpirationDate.UTC().Format("2006-01-02T15:04:05.000Z")
			x.Expiration = &LifecycleExpiration{Date: &d}
		case r.ExpiredObjectDeleteMarker:
			x.Expiration = &LifecycleExpiration{ExpiredObjectDeleteMarker: &r.ExpiredObjectDeleteMarker}
		}
		if r.NoncurrentDays > 0 {
			nv := &NoncurrentExpiration{NoncurrentDays: &r.NoncurrentDays}
			if r.NewerNoncurrentVersions > 0 {
				nv.NewerNoncurrentVersions = &r.NewerNoncurrentVersions
			}
			x.NoncurrentVersionExpiration = nv
		}
		if r.AbortDays > 0 {
			x.AbortIncompleteMultipartUpload = &AbortIncomplete{DaysAfterInitiation: &r.AbortDays}
		}
		out.Rules = append(out.Rules, x)
	}
	return out
}

// lifecycleDue returns when something created at t is due after n
// lifecycle days: t plus n days, rounded up to the next day boundary (S3
// rounds to the next midnight UTC; with 24 h days this is the same).
func lifecycleDue(t time.Time, n int, day time.Duration) time.Time {
	due := t.Add(time.Duration(n) * day)
	if r := due.Truncate(day); r.Before(due) {
		return r.Add(day)
	}
	return due
}

// ruleMatches reports whether enabled rule r's filter selects an object.
func ruleMatches(r *metadata.LifecycleRule, key string, size int64, tags map[string]string) bool {
	if !r.Enabled || !strings.HasPrefix(key, r.Prefix) {
		return false
	}
	if (r.SizeGreaterThan > 0 && size <= r.SizeGreaterThan) || (r.SizeLessThan > 0 && size >= r.SizeLessThan) {
		return false
	}
	for _, t := range r.Tags {
		if v, ok := tags[t.Key]; !ok || v != t.Value {
			return false
		}
	}
	return true
}

// objectExpires reports whether any rule expires the current object key
// (of size bytes, with tags, last modified at modified) at now.
func objectExpires(rules []metadata.LifecycleRule, key string, size int64, tags map[string]string, modified, now time.Time, day time.Duration) bool {
	for i := range rules {
		r := &rules[i]
		if r.ExpirationDays == 0 && r.ExpirationDate.IsZero() {
			continue
		}
		if !ruleMatches(r, key, size, tags) {
			continue
		}
		if r.ExpirationDays > 0 && !now.Before(lifecycleDue(modified, r.ExpirationDays, day)) {
			return true
		}
		if !r.ExpirationDate.IsZero() && !now.Before(r.ExpirationDate) {
			return true
		}
	}
	return false
}

// versionDue reports whether the rules remove version i of a key at now
// (vs: the key's versions, newest first, as ListObjectVersions lists
// them; tags: version i's). A noncurrent version (i > 0) goes under
// NoncurrentVersionExpiration NoncurrentDays after it became noncurrent,
// which is when the version above it was written (as in S3), once at
// least NewerNoncurrentVersions noncurrent versions are newer than it;
// noncurrent delete markers count and go like the other versions. The
// current version goes here only when it is a delete marker with nothing
// under it and a rule says ExpiredObjectDeleteMarker (an expiring
// current object is objectExpires: a delete marker, not a removal).
func versionDue(rules []metadata.LifecycleRule, vs []metadata.ListEntry, i int, tags map[string]string, now time.Time, day time.Duration) bool {
	v := &vs[i]
	for j := range rules {
		r := &rules[j]
		if !ruleMatches(r, v.Key, v.Size, tags) {
			continue
		}
		switch {
		case i == 0:
			if r.ExpiredObjectDeleteMarker && v.Deleted && len(vs) == 1 {
				return true
			}
		case r.NoncurrentDays > 0 && i-1 >= r.NewerNoncurrentVersions:
			if !now.Before(lifecycleDue(vs[i-1].Modified, r.NoncurrentDays, day)) {
				return true
			}
		}
	}
	return false
}

// uploadExpires reports whether any rule aborts the multipart upload of
// key initiated at initiated, at now.
func uploadExpires(rules []metadata.LifecycleRule, key string, initiated, now time.Time, day time.Duration) bool {
	for i := range rules {
		r := &rules[i]
		if r.AbortDays > 0 && r.Enabled && strings.HasPrefix(key, r.Prefix) && !now.Before(lifecycleDue(initiated, r.AbortDays, day)) {
			return true
		}
	}
	return false
}

// bucketLifecycle answers Get/Put/DeleteBucketLifecycleConfiguration.
func (g *Gateway) bucketLifecycle(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	switch req.method {
	case fiber.MethodGet:
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if len(b.Lifecycle) == 0 {
			return apiErr("NoSuchLifecycleConfiguration", "")
		}
		return sendXML(c, fiber.StatusOK, lifecycleXML(b.Lifecycle))
	case fiber.MethodPut:
		var in lifecycleInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		rules, err := lifecycleRules(&in)
		if err != nil {
			return err
		}
		return g.setBucketConfig(c, req, fiber.StatusOK, func(b *metadata.Bucket) { b.Lifecycle = rules })
	case fiber.MethodDelete:
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Lifecycle = nil })
	}
	return apiErr("MethodNotAllowed", "")
}
