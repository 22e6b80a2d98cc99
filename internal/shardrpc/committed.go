package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/metadata"
)

// PathCommitted takes a CommittedRequest: an older gateway tells the
// servers that stored a manifest that a write quorum stored it. Servers
// used to mark the version committed for readers; since lookups stopped
// reading marks they take it exactly as PathConfirmed (a confirm note,
// nothing written), and current gateways send PathConfirmed. Kept so
// that older gateways' notices still spare confirm jobs their asking.
const PathCommitted = "/v1/manifests/committed"

// PathConfirmed takes a CommittedRequest too, for the confirm jobs alone:
// the repair worker tells the servers that stored a manifest switch that
// a write quorum stored it, and they note it for their confirm jobs
// without marking it committed (a switch may place the key outside the
// servers rule 1's argument counts on). A path of its own rather than a
// field of the request: a server that predates it answers 404 (a notice
// is best effort) where it would have read a field it ignores as a
// commit notice and marked the version.
const PathConfirmed = "/v1/manifests/confirmed"

// VersionRef names one version of a key.
type VersionRef struct {
	Bucket  string           `json:"bucket"`
	Key     string           `json:"key"`
	Version metadata.Version `json:"version"`
}

// CommittedRequest lists versions each stored by a write quorum (the body
// of PathCommitted and PathConfirmed).
type CommittedRequest struct {
	Versions []VersionRef `json:"versions"`
	// Switch says the versions are repair switches: each replaced a
	// manifest of the same object, and a repair writes them by the
	// hundred per second for as long as it runs, so the server runs their
	// confirm jobs at once (early confirmation) rather than let the
	// replaced records reach the LSM's level 0. A gateway's notice after
	// an overwrite or a delete leaves the jobs to their time: run at
	// once, they would add their work to the client's requests (a
	// DeleteObjects of 5,000 keys ran 16% slower). A server that predates
	// the field ignores it, which only leaves the jobs to their time.
	Switch bool `json:"switch,omitempty"`
}

// Committed tells addr that each of refs (at most MaxBatch) is stored on a
// write quorum, on PathCommitted (what gateways before PathConfirmed sent).
func (c *Client) Committed(ctx context.Context, addr string, refs []VersionRef) error {
	return c.notice(ctx, addr, PathCommitted, "committed", CommittedRequest{Versions: refs})
}

// Confirmed tells addr that each of refs (at most MaxBatch) is stored on a
// write quorum, for its confirm jobs (PathConfirmed). Current servers take
// both notices alike; a server that predates PathConfirmed answers 404.
func (c *Client) Confirmed(ctx context.Context, addr string, refs []VersionRef) error {
	return c.notice(ctx, addr, PathConfirmed, "confirmed", CommittedRequest{Versions: refs})
}

// SwitchConfirmed tells addr that each of refs (at most MaxBatch), repair
// switches, is stored on a write quorum (PathConfirmed with Switch set).
func (c *Client) SwitchConfirmed(ctx context.Context, addr string, refs []VersionRef) error {
	return c.notice(ctx, addr, PathConfirmed, "switch confirmed", CommittedRequest{Versions: refs, Switch: true})
}

// notice posts req to path (both notices' body).
func (c *Client) notice(ctx context.Context, addr, path, what string, req CommittedRequest) error {
	refs := req.Versions
	if len(refs) > MaxBatch {
		return fmt.Errorf("%w: %d versions in one notice (at most %d)", ErrBadRequest, len(refs), MaxBatch)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return c.call(ctx, addr, fmt.Sprintf("%s %d versions", what, len(refs)), http.MethodPost, path, nil, bytes.NewReader(body), nil)
}
