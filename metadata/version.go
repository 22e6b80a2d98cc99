package metadata

import (
	"fmt"
	"strconv"
	"strings"
)

// Version orders the writes of one key across gateways: a hybrid wall-clock
// timestamp, then the writer's ID to break ties. Newer wins everywhere.
type Version struct {
	// TS is nanoseconds since the Unix epoch, made monotonic per writer.
	TS int64 `json:"ts"`
	// Writer is the ID of the gateway (or repairer) that made the write.
	Writer string `json:"writer"`
}

// Clone returns v with its own copy of Writer. A decoded manifest's
// strings share the buffer of its whole record (the JSON decoder does not
// copy them), so a version kept long after its manifest, in a queue of
// thousands, keeps that buffer alive unless cloned.
func (v Version) Clone() Version {
	v.Writer = strings.Clone(v.Writer)
	return v
}

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	if v.TS != o.TS {
		return v.TS < o.TS
	}
	return v.Writer < o.Writer
}

// IsZero reports whether v is the zero version (never written).
func (v Version) IsZero() bool { return v.TS == 0 && v.Writer == "" }

// String encodes v so that string order equals version order.
func (v Version) String() string { return fmt.Sprintf("%016x.%s", uint64(v.TS), v.Writer) }

// ParseVersion is the inverse of Version.String.
func ParseVersion(s string) (Version, error) {
	ts, writer, ok := strings.Cut(s, ".")
	if !ok || len(ts) != 16 {
		return Version{}, fmt.Errorf("metadata: bad version %q", s)
	}
	n, err := strconv.ParseUint(ts, 16, 64)
	if err != nil {
		return Version{}, fmt.Errorf("metadata: bad version %q: %w", s, err)
	}
	return Version{TS: int64(n), Writer: writer}, nil
}
