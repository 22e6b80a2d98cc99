package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// Access key management, under AdminPrefix + "keys" (administrators
// only; `regen admin key ...` is its client):
//
//	GET    keys                              every key, without secrets
//	POST   keys?name=N[&admin=true][&create-buckets=true]
//	                                         a new key; the answer is the only
//	                                         place its secret is ever shown
//	DELETE keys?key=K                        delete a stored key
//	POST   keys/grant?key=K&bucket=B[&prefix=P]&right=R
//	                                         give rights (read, write, owner,
//	                                         comma-separated) on bucket B, or
//	                                         only on its keys that begin with P;
//	                                         without a bucket: admin,
//	                                         create-buckets
//	DELETE keys/grant?key=K[&bucket=B][&prefix=P][&right=R]
//	                                         take them back (every right on
//	                                         B, its prefixes' included, when
//	                                         neither prefix nor right is named)
//
// K is a stored key's access key ID or its name. B may be given as
// BUCKET/PREFIX instead of with prefix=.

// KeyInfo describes an access key in the admin API.
type KeyInfo struct {
	AccessKey string `json:"access_key"`
	// SecretKey is set only in the answer that created the key.
	SecretKey     string `json:"secret_key,omitempty"`
	Name          string `json:"name,omitempty"`
	Admin         bool   `json:"admin"`
	CreateBuckets bool   `json:"create_buckets"`
	// Configured: given to the gateways by flags (--access-key,
	// --credentials-file), not stored: an administrator that regen
	// cannot change or delete. Only this gateway's are listed.
	Configured bool      `json:"configured,omitempty"`
	Created    time.Time `json:"created,omitzero"`
	// Buckets maps each bucket the key has rights on to them ("read",
	// "write", "owner").
	Buckets map[string][]string `json:"buckets,omitempty"`
	// Prefixes maps "bucket/prefix" to the key's rights on the objects
	// of bucket whose keys begin with prefix.
	Prefixes map[string][]string `json:"prefixes,omitempty"`
}

// maxPrefixGrants bounds the prefixes one key has rights on in one
// bucket: every request of the key in the bucket looks at each.
const maxPrefixGrants = 100

// maxKeyName bounds a key's name.
const maxKeyName = 64

// validKeyName: 1 to 64 letters, digits and . _ - @ (a person's or a
// service's name, an e-mail address).
func validKeyName(name string) bool {
	if name == "" || len(name) > maxKeyName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)) {
			return false
		}
	}
	return true
}

// rightNames lists the rights r grants, in a fixed order.
func rightNames(r metadata.Rights) []string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{{r.Read, "read"}, {r.Write, "write"}, {r.Owner, "owner"}} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return out
}

// parseRights reads a comma-separated list of bucket rights; "" is none.
func parseRights(s string) (metadata.Rights, error) {
	var r metadata.Rights
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "read":
			r.Read = true
		case "write":
			r.Write = true
		case "owner":
			r.Owner = true
		case "":
		default:
			return r, apiErr("InvalidArgument", fmt.Sprintf("unknown right %q: a bucket's rights are read, write and owner; admin and create-buckets go without a bucket", name))
		}
	}
	return r, nil
}

func (g *Gateway) serveKeys(c *fiber.Ctx, req *request, sub string) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if !g.keys.enabled() {
		return apiErr("NotImplemented", errNoKeyStore.Error())
	}
	var (
		out any
		err error
	)
	switch {
	case sub == "" && c.Method() == fiber.MethodGet:
		out, err = g.listKeys(ctx)
	case sub == "" && c.Method() == fiber.MethodPost:
		out, err = g.createKey(ctx, c.Query("name"), c.QueryBool("admin"), c.QueryBool("create-buckets"))
	case sub == "" && c.Method() == fiber.MethodDelete:
		out, err = g.deleteAccessKey(ctx, c.Query("key"))
	case sub == "/grant" && (c.Method() == fiber.MethodPost || c.Method() == fiber.MethodDelete):
		out, err = g.grantKey(ctx, c.Query("key"), c.Query("bucket"), c.Query("prefix"), c.Query("right"), c.Method() == fiber.MethodPost)
	default:
		return apiErr("MethodNotAllowed", "GET, POST or DELETE /_regen/keys; POST or DELETE /_regen/keys/grant")
	}
	if err != nil {
		return err
	}
	g.log.Info("access keys changed", "by", req.who.accessKey, "method", c.Method(), "path", AdminPrefix+"keys"+sub, "key", c.Query("key")+c.Query("name"), "bucket", c.Query("bucket"), "prefix", c.Query("prefix"), "right", c.Query("right"))
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	c.Set("Content-Type", "application/json")
	c.Set("Cache-Control", "no-store")
	return c.Send(body)
}

// listKeys lists this gateway's configured keys, then every live stored
// key by name, each with its rights.
func (g *Gateway) listKeys(ctx context.Context) ([]KeyInfo, error) {
	keys, err := g.keys.all(ctx)
	if err != nil {
		return nil, err
	}
	g.buckets.invalidate()
	buckets, err := g.layer.listBuckets(ctx, g.buckets)
	if err != nil {
		return nil, err
	}
	out := []KeyInfo{}
	for _, id := range slices.Sorted(maps.Keys(g.cfg.Credentials)) {
		out = append(out, KeyInfo{AccessKey: id, Admin: true, CreateBuckets: true, Configured: true})
	}
	var stored []KeyInfo
	for _, k := range keys {
		if k.rec.Deleted {
			continue
		}
		stored = append(stored, g.keyInfo(&k.rec, buckets))
	}
	slices.SortFunc(stored, func(a, b KeyInfo) int {
		return strings.Compare(a.Name+"\x00"+a.AccessKey, b.Name+"\x00"+b.AccessKey)
	})
	return append(out, stored...), nil
}

// keyInfo describes stored key k with its rights in buckets.
func (g *Gateway) keyInfo(k *metadata.AccessKey, buckets []metadata.Bucket) KeyInfo {
	info := KeyInfo{AccessKey: k.ID, Name: k.Name, Admin: k.Admin, CreateBuckets: k.CreateBuckets, Created: k.Created}
	for _, b := range buckets {
		if r := b.Grants[k.ID]; r.Any() {
			if info.Buckets == nil {
				info.Buckets = map[string][]string{}
			}
			info.Buckets[b.Name] = rightNames(r)
		}
		for _, p := range b.PrefixGrants[k.ID] {
			if p.Any() {
				if info.Prefixes == nil {
					info.Prefixes = map[string][]string{}
				}
				info.Prefixes[b.Name+"/"+p.Prefix] = rightNames(p.Rights)
			}
		}
	}
	return info
}

// createKey stores a new key pair and returns it with its secret.
func (g *Gateway) createKey(ctx context.Context, name string, admin, createBuckets bool) (KeyInfo, error) {
	if !validKeyName(name) {
		return KeyInfo{}, apiErr("InvalidArgument", fmt.Sprintf("name %q: want 1 to %d letters, digits and . _ - @", name, maxKeyName))
	}
	id, secret := newKeyPair()
	rec := &metadata.AccessKey{
		ID: id, Name: name, Created: time.Now().UTC(),
		SealedSecret: seal(g.keys.aead, id, secret), Admin: admin, CreateBuckets: createBuckets,
	}
	defer g.keys.invalidate()
	// NB: the name is checked there, under its lease: two creations of
	// one name through two gateways cannot both succeed.
	if err := g.layer.createAccessKey(ctx, g.keys.store, rec); err != nil {
		return KeyInfo{}, err
	}
	info := g.keyInfo(rec, nil)
	info.SecretKey = secret
	return info, nil
}

// resolveKey finds the live stored key named by ref: its access key ID or
// its name.
func (g *Gateway) resolveKey(ctx context.Context, ref string) (*metadata.AccessKey, error) {
	if ref == "" {
		return nil, apiErr("InvalidArgument", "missing key (an access key ID or a key's name)")
	}
	if _, ok := g.cfg.Credentials[ref]; ok {
		return nil, apiErr("InvalidArgument", fmt.Sprintf("%s is a configured key (--access-key, --credentials-file): an administrator that only the gateways' configuration changes", ref))
	}
	keys, err := g.keys.all(ctx)
	if err != nil {
		return nil, err
	}
	if k := keys[ref]; k != nil && !k.rec.Deleted {
		rec := k.rec
		return &rec, nil
	}
	var found *metadata.AccessKey
	for _, k := range keys {
		if !k.rec.Deleted && k.rec.Name == ref {
			if found != nil {
				return nil, apiErr("InvalidArgument", fmt.Sprintf("two keys are named %s (%s, %s): name it by its access key", ref, found.ID, k.rec.ID))
			}
			rec := k.rec
			found = &rec
		}
	}
	if found == nil {
		return nil, errNoAccessKey(ref)
	}
	return found, nil
}

// errNoAccessKey: ref names no live stored key.
func errNoAccessKey(ref string) error {
	return apiErr("InvalidArgument", fmt.Sprintf("no access key %q (regen admin key list shows them)", ref))
}

// deleteAccessKey replaces a stored key by a tombstone (without its secret) and
// then takes its grants out of the bucket records. Once the tombstone is
// stored the key cannot sign anything, on every gateway within
// KeyCacheTTL, whether or not its grants are all gone.
func (g *Gateway) deleteAccessKey(ctx context.Context, ref string) (KeyInfo, error) {
	k, err := g.resolveKey(ctx, ref)
	if err != nil {
		return KeyInfo{}, err
	}
	defer g.keys.invalidate()
	_, err = g.layer.updateAccessKey(ctx, g.keys.store, k.ID, func(rec *metadata.AccessKey) error {
		*k = *rec
		*rec = metadata.AccessKey{ID: rec.ID, Name: rec.Name, Created: rec.Created, Deleted: true}
		return nil
	})
	if errors.Is(err, errNotFound) {
		return KeyInfo{}, errNoAccessKey(ref)
	}
	if err != nil {
		return KeyInfo{}, err
	}
	buckets, err := g.layer.listBuckets(ctx, g.buckets)
	if err == nil {
		for _, b := range buckets {
			_, bucketWide := b.Grants[k.ID]
			_, prefixed := b.PrefixGrants[k.ID]
			if !bucketWide && !prefixed {
				continue
			}
			err = errors.Join(err, g.layer.updateBucket(ctx, g.buckets, b.Name, func(b *metadata.Bucket) error {
				delete(b.Grants, k.ID)
				delete(b.PrefixGrants, k.ID)
				return nil
			}))
		}
	}
	if err != nil {
		g.log.Warn("access key deleted, but some of its grants stay in bucket records (they grant nothing to a deleted key)", "access_key", k.ID, "err", err)
	}
	return g.keyInfo(k, nil), nil
}

// grantKey gives (grant) or takes back rights of a stored key: rights on
// a bucket or on the keys of a bucket that begin with prefix, or without
// a bucket the admin and create-buckets flags.
func (g *Gateway) grantKey(ctx context.Context, ref, bucket, prefix, rights string, grant bool) (KeyInfo, error) {
	k, err := g.resolveKey(ctx, ref)
	if err != nil {
		return KeyInfo{}, err
	}
	if b, p, ok := strings.Cut(bucket, "/"); ok {
		if prefix != "" {
			return KeyInfo{}, apiErr("InvalidArgument", "give the prefix either after the bucket (BUCKET/PREFIX) or with prefix=, not both")
		}
		bucket, prefix = b, p
	}
	if bucket == "" {
		if prefix != "" {
			return KeyInfo{}, apiErr("InvalidArgument", "a prefix needs its bucket")
		}
		err := g.setKeyFlags(ctx, k, rights, grant)
		if errors.Is(err, errNotFound) {
			return KeyInfo{}, errNoAccessKey(ref)
		}
		if err != nil {
			return KeyInfo{}, err
		}
	} else {
		if err := checkGrantPrefix(prefix); err != nil {
			return KeyInfo{}, err
		}
		r, err := parseRights(rights)
		if err != nil {
			return KeyInfo{}, err
		}
		if grant && !r.Any() {
			return KeyInfo{}, apiErr("InvalidArgument", "missing right: read, write or owner (comma-separated for several)")
		}
		err = g.layer.updateBucket(ctx, g.buckets, bucket, func(b *metadata.Bucket) error {
			return changeGrant(b, k.ID, prefix, r, grant)
		})
		if err != nil {
			return KeyInfo{}, bucketErr(err)
		}
	}
	buckets, err := g.layer.listBuckets(ctx, g.buckets)
	if err != nil {
		return KeyInfo{}, err
	}
	return g.keyInfo(k, buckets), nil
}

// checkGrantPrefix refuses a prefix no object key can begin with: too
// long, not UTF-8, or holding what XML cannot carry (keys.go).
func checkGrantPrefix(prefix string) error {
	if len(prefix) > maxKeyLen {
		return apiErr("InvalidArgument", fmt.Sprintf("prefix of %d bytes: object keys have at most %d", len(prefix), maxKeyLen))
	}
	return checkKeyText("The prefix", prefix)
}

// changedRights returns cur with r added (grant), or taken away; a
// revoke naming no right takes every one.
func changedRights(cur, r metadata.Rights, grant bool) metadata.Rights {
	switch {
	case grant:
		return cur.Union(r)
	case !r.Any():
		return metadata.Rights{}
	}
	return metadata.Rights{Read: cur.Read && !r.Read, Write: cur.Write && !r.Write, Owner: cur.Owner && !r.Owner}
}

// changeGrant applies a grant or revoke of rights r of access key id to
// bucket record b: on the whole bucket when prefix is empty, else on the
// keys beginning with prefix. Revoking every right on the whole bucket
// (no prefix, no right named) takes its prefixes' rights too.
func changeGrant(b *metadata.Bucket, id, prefix string, r metadata.Rights, grant bool) error {
	if prefix == "" {
		cur := changedRights(b.Grants[id], r, grant)
		if cur.Any() {
			if b.Grants == nil {
				b.Grants = map[string]metadata.Rights{}
			}
			b.Grants[id] = cur
		} else {
			delete(b.Grants, id)
		}
		if !grant && !r.Any() {
			delete(b.PrefixGrants, id)
		}
		return nil
	}
	old := b.PrefixGrants[id]
	i, found := slices.BinarySearchFunc(old, prefix, func(p metadata.PrefixRights, s string) int { return strings.Compare(p.Prefix, s) })
	var cur metadata.Rights
	if found {
		cur = old[i].Rights
	}
	cur = changedRights(cur, r, grant)
	// NB: a new slice: old may be shared with the record it came from.
	list := slices.Clone(old)
	switch {
	case cur.Any() && found:
		list[i].Rights = cur
	case cur.Any():
		if len(list) >= maxPrefixGrants {
			return apiErr("InvalidArgument", fmt.Sprintf("the key has rights on %d prefixes of bucket %s already, the most regen keeps: revoke some, or grant on a shorter prefix", len(list), b.Name))
		}
		list = slices.Insert(list, i, metadata.PrefixRights{Prefix: prefix, Rights: cur})
	case found:
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(b.PrefixGrants, id)
		return nil
	}
	if b.PrefixGrants == nil {
		b.PrefixGrants = map[string][]metadata.PrefixRights{}
	}
	b.PrefixGrants[id] = list
	return nil
}

// setKeyFlags sets (grant) or clears the admin or create-buckets flag of
// stored key k and stores the record as a new version (updateAccessKey:
// the newest record, read under its lease, not k, is changed); k is set
// to the record stored. errNotFound: the key is deleted meanwhile.
func (g *Gateway) setKeyFlags(ctx context.Context, k *metadata.AccessKey, flags string, grant bool) error {
	if flags == "" {
		return apiErr("InvalidArgument", "missing bucket (for read, write, owner) or right admin or create-buckets")
	}
	var admin, createBuckets bool
	for _, f := range strings.Split(flags, ",") {
		switch strings.TrimSpace(f) {
		case "admin":
			admin = true
		case "create-buckets", "create-bucket":
			createBuckets = true
		case "read", "write", "owner":
			return apiErr("InvalidArgument", fmt.Sprintf("right %s is a bucket's: name the bucket", f))
		default:
			return apiErr("InvalidArgument", fmt.Sprintf("unknown right %q: admin and create-buckets go without a bucket; read, write and owner with one", f))
		}
	}
	defer g.keys.invalidate()
	stored, err := g.layer.updateAccessKey(ctx, g.keys.store, k.ID, func(rec *metadata.AccessKey) error {
		if admin {
			rec.Admin = grant
		}
		if createBuckets {
			rec.CreateBuckets = grant
		}
		return nil
	})
	if err != nil {
		return err
	}
	*k = *stored
	return nil
}
