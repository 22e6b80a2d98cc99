package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/regen-s3/regen/metadata"
)

// PathAccessKeys takes POST with a JSON metadata.AccessKey (stored if newer
// than the node's record of that ID; answered with a PutBucketResponse;
// fenced by a lease when ParamLease is given, see ParamLeaseOf) and GET,
// which answers every access key record of the node, tombstones included,
// as a JSON array. The records hold sealed secrets only (see
// metadata.AccessKey), and like every shard path it needs the cluster
// secret's signature.
const PathAccessKeys = "/v1/access-keys"

// ParamLeaseOf names which lease a fenced access key write (ParamLease:
// its holder) is checked against: LeaseOfName for a creation (the lease
// of the key's name, AccessKeyNameLeaseName), anything else for a change
// of an existing key (the lease of its ID, AccessKeyLeaseName). The server
// derives the lease's name from the record itself, never from the
// request, so a writer cannot fence its write by an unrelated lease.
const ParamLeaseOf = "lease_of"

// LeaseOfName is ParamLeaseOf's value for a creation's write.
const LeaseOfName = "name"

// AccessKeyLeaseName is the name of the lease on access key id's record,
// held by every change of the record (a flag change, the deletion) from
// its read to its write and checked by the servers against its fenced
// writes (PutAccessKeyFenced).
func AccessKeyLeaseName(id string) string { return "accesskey/" + id }

// AccessKeyNameLeaseName is the name of the lease on the access key name
// name, held by the creation of a key of that name from its check that
// no live key has the name to its write (CreateAccessKeyFenced), so two
// creations of one name cannot both pass the check.
func AccessKeyNameLeaseName(name string) string { return "accesskey-name/" + name }

// PutAccessKey stores the access key record on addr if it is newer than
// the node's.
func (c *Client) PutAccessKey(ctx context.Context, addr string, k *metadata.AccessKey) error {
	return c.putAccessKey(ctx, addr, k, nil)
}

func (c *Client) putAccessKey(ctx context.Context, addr string, k *metadata.AccessKey, q url.Values) error {
	op := "put access key " + k.ID
	body, err := json.Marshal(k)
	if err != nil {
		return &NodeError{Addr: addr, Op: op, Err: err}
	}
	return c.call(ctx, addr, op, http.MethodPost, PathAccessKeys, q, bytes.NewReader(body), &PutBucketResponse{})
}

// PutAccessKeyFenced is PutAccessKey made under the lease on the key's
// record (AccessKeyLeaseName(k.ID)) held by lease: the node refuses it
// (ErrLeaseHeld) unless lease holds it and has not expired, so a change
// whose lease ran out cannot land over the next holder's change (a flag
// change cannot bring back a key deleted meanwhile).
func (c *Client) PutAccessKeyFenced(ctx context.Context, addr string, k *metadata.AccessKey, lease string) error {
	return c.putAccessKey(ctx, addr, k, url.Values{ParamLease: {lease}})
}

// CreateAccessKeyFenced is PutAccessKey of a new key made under the lease
// on its name (AccessKeyNameLeaseName(k.Name)) held by lease: the node
// refuses it (ErrLeaseHeld) unless lease holds it and has not expired.
func (c *Client) CreateAccessKeyFenced(ctx context.Context, addr string, k *metadata.AccessKey, lease string) error {
	return c.putAccessKey(ctx, addr, k, url.Values{ParamLease: {lease}, ParamLeaseOf: {LeaseOfName}})
}

// ListAccessKeys returns every access key record of addr, tombstones
// included.
func (c *Client) ListAccessKeys(ctx context.Context, addr string) ([]metadata.AccessKey, error) {
	var out []metadata.AccessKey
	if err := c.call(ctx, addr, "list access keys", http.MethodGet, PathAccessKeys, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
