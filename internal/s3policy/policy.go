package s3policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// MaxSize is the largest policy document S3 accepts, in bytes.
const MaxSize = 20 << 10

// Error is why a policy was refused; S3 answers it as MalformedPolicy.
type Error struct{ Reason string }

// Error implements error.
func (e *Error) Error() string { return "malformed policy: " + e.Reason }

func malformed(format string, a ...any) error { return &Error{Reason: fmt.Sprintf(format, a...)} }

// Policy is a parsed bucket policy.
type Policy struct {
	Statements []Statement
}

// Statement is one statement of a policy.
type Statement struct {
	Sid  string
	Deny bool
	// Everyone: the statement applies to every caller, signed or
	// anonymous (Principal "*"). Otherwise it applies to the signed
	// callers whose access key ID is in Principals.
	Everyone   bool
	Principals []string
	Actions    []string // patterns, e.g. "s3:Get*"
	Resources  []string // ARN patterns
	Conditions []Condition
}

// Condition is one operator applied to one key: true when the request's
// value of Key matches any of Values (for a negated operator, none).
type Condition struct {
	Op     string
	Key    string // lower case
	Values []string
	nets   []netip.Prefix // IpAddress / NotIpAddress
}

// Decision is the outcome of evaluating a policy for a request.
type Decision int

// Decisions.
const (
	NoMatch Decision = iota // no statement applies: fall back to ACLs and owners
	Allow
	Deny
)

// String names the decision.
func (d Decision) String() string {
	return [...]string{"no match", "allow", "deny"}[d]
}

// Request is what a policy is evaluated against.
type Request struct {
	// Principal is the access key ID that signed the request; "" for an
	// anonymous one.
	Principal string
	Action    string // "s3:GetObject"
	Resource  string // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
	// Context holds the condition keys the request has, lower case
	// ("aws:securetransport" "true"); a key a request lacks is absent.
	Context map[string]string
}

// conditionKeys are the keys regen fills in, with the operators that may
// test them.
var conditionKeys = map[string][]string{
	"aws:securetransport": {"Bool"},
	"aws:sourceip":        {"IpAddress", "NotIpAddress"},
	"aws:referer":         stringOps,
	"aws:useragent":       stringOps,
	"s3:prefix":           stringOps,
	"s3:delimiter":        stringOps,
}

var stringOps = []string{"StringEquals", "StringNotEquals", "StringLike", "StringNotLike", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"}

// Parse parses a bucket policy for bucket and checks that regen can
// enforce every part of it; the error is an *Error naming what cannot.
func Parse(doc []byte, bucket string) (*Policy, error) {
	if len(doc) > MaxSize {
		return nil, malformed("policies must be at most %d bytes", MaxSize)
	}
	var raw struct {
		Version   string          `json:"Version"`
		ID        string          `json:"Id"`
		Statement json.RawMessage `json:"Statement"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, malformed("not a policy document: %v", err)
	}
	switch raw.Version {
	case "2012-10-17", "2008-10-17":
	case "":
		return nil, malformed("the policy needs a Version (2012-10-17)")
	default:
		return nil, malformed("unsupported policy Version %q", raw.Version)
	}
	var stmts []rawStatement
	if err := oneOrMany(raw.Statement, &stmts); err != nil || len(stmts) == 0 {
		return nil, malformed("the policy needs at least one Statement")
	}
	p := &Policy{}
	for i, rs := range stmts {
		s, err := rs.parse(bucket)
		if err != nil {
			return nil, malformed("statement %d: %v", i+1, err.(*Error).Reason)
		}
		p.Statements = append(p.Statements, s)
	}
	return p, nil
}

type rawStatement struct {
	Sid          string                                `json:"Sid"`
	Effect       string                                `json:"Effect"`
	Principal    json.RawMessage                       `json:"Principal"`
	NotPrincipal json.RawMessage                       `json:"NotPrincipal"`
	Action       json.RawMessage                       `json:"Action"`
	NotAction    json.RawMessage                       `json:"NotAction"`
	Resource     json.RawMessage                       `json:"Resource"`
	NotResource  json.RawMessage                       `json:"NotResource"`
	Condition    map[string]map[string]json.RawMessage `json:"Condition"`
}

// oneOrMany decodes a JSON value that is either one item or an array.
func oneOrMany[T any](raw json.RawMessage, out *[]T) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return errors.New("missing")
	}
	if raw[0] == '[' {
		return json.Unmarshal(raw, out)
	}
	var one T
	if err := json.Unmarshal(raw, &one); err != nil {
		return err
	}
	*out = []T{one}
	return nil
}

func (rs *rawStatement) parse(bucket string) (Statement, error) {
	s := Statement{Sid: rs.Sid}
	switch rs.Effect {
	case "Allow":
	case "Deny":
		s.Deny = true
	default:
		return s, malformed("Effect must be Allow or Deny")
	}
	switch {
	case len(rs.NotPrincipal) > 0:
		return s, malformed("regen does not support NotPrincipal")
	case len(rs.NotAction) > 0:
		return s, malformed("regen does not support NotAction")
	case len(rs.NotResource) > 0:
		return s, malformed("regen does not support NotResource")
	}
	var err error
	if s.Everyone, s.Principals, err = parsePrincipal(rs.Principal); err != nil {
		return s, err
	}
	if err := oneOrMany(rs.Action, &s.Actions); err != nil || len(s.Actions) == 0 {
		return s, malformed("Action must be a string or a list of strings")
	}
	for _, a := range s.Actions {
		if err := checkAction(a); err != nil {
			return s, err
		}
	}
	if err := oneOrMany(rs.Resource, &s.Resources); err != nil || len(s.Resources) == 0 {
		return s, malformed("Resource must be a string or a list of strings")
	}
	for _, r := range s.Resources {
		if err := checkResource(r, bucket); err != nil {
			return s, err
		}
	}
	for _, op := range slices.Sorted(maps.Keys(rs.Condition)) {
		for _, key := range slices.Sorted(maps.Keys(rs.Condition[op])) {
			c, err := parseCondition(op, key, rs.Condition[op][key])
			if err != nil {
				return s, err
			}
			s.Conditions = append(s.Conditions, c)
		}
	}
	return s, nil
}

// UserARNPrefix begins the ARN form of a principal regen accepts:
// arn:aws:iam::ACCOUNT:user/ACCESS-KEY-ID. regen has one account, so
// ACCOUNT is not checked (it may be empty); what names the key is its
// access key ID, never its name: a name may be given again to a new key
// after the first one is deleted, and must not inherit what a policy
// granted or denied the first (IAM ties principals to unique IDs for the
// same reason).
const UserARNPrefix = "arn:aws:iam::"

// MaxPrincipals bounds the access keys one statement may name.
const MaxPrincipals = 100

// parsePrincipal reads a statement's Principal: "*" or {"AWS": "*"} for
// everyone, or {"AWS": ID-or-ARN} / {"AWS": [...]} naming access keys,
// each as its access key ID or arn:aws:iam::ACCOUNT:user/ID. A list
// holding "*" is everyone.
func parsePrincipal(raw json.RawMessage) (everyone bool, keys []string, err error) {
	const supported = `regen supports Principal "*" (everyone) and {"AWS": [...]} naming access keys by access key ID, plain or as arn:aws:iam::ACCOUNT:user/ACCESS-KEY-ID`
	if len(bytes.TrimSpace(raw)) == 0 {
		return false, nil, malformed("a statement needs a Principal")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "*" {
			return false, nil, malformed("Principal %q: %s", s, supported)
		}
		return true, nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 || m["AWS"] == nil {
		return false, nil, malformed("%s", supported)
	}
	var list []string
	if oneOrMany(m["AWS"], &list) != nil || len(list) == 0 {
		return false, nil, malformed("Principal AWS must be a string or a list of strings")
	}
	if len(list) > MaxPrincipals {
		return false, nil, malformed("a statement may name at most %d principals", MaxPrincipals)
	}
	for _, p := range list {
		if p == "*" {
			everyone = true
			continue
		}
		id, err := principalKey(p)
		if err != nil {
			return false, nil, malformed("Principal %q: %v; %s", p, err, supported)
		}
		if !slices.Contains(keys, id) {
			keys = append(keys, id)
		}
	}
	if everyone {
		return true, nil, nil
	}
	return false, keys, nil
}

// principalKey returns the access key ID a principal names: the ID
// itself, or the user name of arn:aws:iam::ACCOUNT:user/ID.
func principalKey(p string) (string, error) {
	id := p
	if rest, ok := strings.CutPrefix(p, UserARNPrefix); ok {
		account, resource, ok := strings.Cut(rest, ":")
		if !ok || strings.ContainsAny(account, "/*?") {
			return "", errors.New("not an IAM ARN")
		}
		if id, ok = strings.CutPrefix(resource, "user/"); !ok {
			return "", errors.New("only user/ARNs name a key (an account, role or group has no access keys in regen)")
		}
	} else if strings.HasPrefix(p, "arn:") {
		return "", errors.New("not an arn:aws:iam:: ARN")
	}
	if !validKeyID(id) {
		return "", fmt.Errorf("%q is not an access key ID (1 to 128 letters, digits and ._-@+=,)", id)
	}
	return id, nil
}

// validKeyID reports whether id can be an access key ID: regen's own
// (20 letters and digits) and configured ones, which are what the
// operator chose (regenadmin, an e-mail address). No wildcards: a
// principal names keys exactly.
func validKeyID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@+=,", r)) {
			return false
		}
	}
	return true
}

// Principals returns every access key ID the policy names, sorted, each
// once: the caller checks that they exist.
func (p *Policy) Principals() []string {
	var out []string
	for _, s := range p.Statements {
		out = append(out, s.Principals...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func checkAction(a string) error {
	if a == "*" || a == "s3:*" {
		return nil
	}
	name, ok := strings.CutPrefix(a, "s3:")
	if !ok {
		return malformed("action %q is not an s3 action", a)
	}
	if strings.ContainsAny(name, "*?") {
		for _, known := range knownActions {
			if match(name, known, true) {
				return nil
			}
		}
		return malformed("action pattern %q matches no s3 action", a)
	}
	if !slices.ContainsFunc(knownActions, func(k string) bool { return strings.EqualFold(k, name) }) {
		return malformed("unknown action %q", a)
	}
	return nil
}

// checkResource accepts ARNs of bucket itself or of its objects.
func checkResource(r, bucket string) error {
	if r == "*" {
		return nil
	}
	rest, ok := strings.CutPrefix(r, "arn:aws:s3:::")
	if !ok {
		return malformed("resource %q is not an arn:aws:s3::: ARN", r)
	}
	b, _, _ := strings.Cut(rest, "/")
	if b != bucket {
		// Patterns over bucket names would reach other buckets' policies'
		// business; S3 refuses a resource outside the bucket too.
		return malformed("resource %q is not in bucket %s", r, bucket)
	}
	return nil
}

func parseCondition(op, key string, raw json.RawMessage) (Condition, error) {
	c := Condition{Op: op, Key: strings.ToLower(key)}
	ops, ok := conditionKeys[c.Key]
	if !ok {
		return c, malformed("regen does not evaluate condition key %q (it does: aws:SecureTransport, aws:SourceIp, aws:Referer, aws:UserAgent, s3:prefix, s3:delimiter)", key)
	}
	if !slices.Contains(ops, op) {
		return c, malformed("regen does not evaluate condition operator %q on %s (it does: %s)", op, key, strings.Join(ops, ", "))
	}
	var vals []json.RawMessage
	if err := oneOrMany(raw, &vals); err != nil || len(vals) == 0 {
		return c, malformed("condition %s %s needs values", op, key)
	}
	for _, v := range vals {
		var s string
		var b bool
		switch {
		case json.Unmarshal(v, &s) == nil:
		case json.Unmarshal(v, &b) == nil:
			s = fmt.Sprint(b)
		default:
			return c, malformed("condition %s %s: values must be strings", op, key)
		}
		c.Values = append(c.Values, s)
	}
	switch op {
	case "Bool":
		for _, v := range c.Values {
			if v != "true" && v != "false" {
				return c, malformed("condition Bool %s: %q is not true or false", key, v)
			}
		}
	case "IpAddress", "NotIpAddress":
		for _, v := range c.Values {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				a, aerr := netip.ParseAddr(v)
				if aerr != nil {
					return c, malformed("condition %s %s: %q is not an IP address or CIDR block", op, key, v)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			c.nets = append(c.nets, p.Masked())
		}
	}
	return c, nil
}

// Evaluate decides r: Deny if a Deny statement applies, else Allow if an
// Allow statement does, else NoMatch.
func (p *Policy) Evaluate(r Request) Decision {
	d := NoMatch
	for i := range p.Statements {
		s := &p.Statements[i]
		if !s.applies(r) {
			continue
		}
		if s.Deny {
			return Deny
		}
		d = Allow
	}
	return d
}

func (s *Statement) applies(r Request) bool {
	if !s.Everyone && (r.Principal == "" || !slices.Contains(s.Principals, r.Principal)) {
		return false
	}
	if !slices.ContainsFunc(s.Actions, func(a string) bool { return a == "*" || match(a, r.Action, true) }) {
		return false
	}
	if !slices.ContainsFunc(s.Resources, func(p string) bool { return p == "*" || match(p, r.Resource, false) }) {
		return false
	}
	for _, c := range s.Conditions {
		if !c.holds(r.Context) {
			return false
		}
	}
	return true
}

// holds evaluates one condition. A key the request lacks matches no value:
// a positive operator is false, a negated one true (as IAM does).
func (c *Condition) holds(ctx map[string]string) bool {
	v, present := ctx[c.Key]
	negated := strings.HasPrefix(c.Op, "StringNot") || c.Op == "NotIpAddress"
	if !present {
		return negated
	}
	hit := false
	switch c.Op {
	case "Bool":
		hit = slices.Contains(c.Values, v)
	case "IpAddress", "NotIpAddress":
		if a, err := netip.ParseAddr(v); err == nil {
			a = a.Unmap()
			hit = slices.ContainsFunc(c.nets, func(p netip.Prefix) bool { return p.Contains(a) })
		}
	case "StringEquals", "StringNotEquals":
		hit = slices.Contains(c.Values, v)
	case "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase":
		hit = slices.ContainsFunc(c.Values, func(w string) bool { return strings.EqualFold(w, v) })
	case "StringLike", "StringNotLike":
		hit = slices.ContainsFunc(c.Values, func(w string) bool { return match(w, v, false) })
	}
	return hit != negated
}

// match reports whether s matches pattern, where * matches any run of
// characters and ? any one character.
func match(pattern, s string, foldCase bool) bool {
	if foldCase {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	// Iterative glob match with backtracking to the last star.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// IsPublic reports whether the policy grants anything to everyone without
// restricting the callers' addresses (S3's GetBucketPolicyStatus). A
// statement naming access keys grants nothing to the public.
func (p *Policy) IsPublic() bool {
	for _, s := range p.Statements {
		if s.Deny || !s.Everyone {
			continue
		}
		restricted := slices.ContainsFunc(s.Conditions, func(c Condition) bool { return c.Key == "aws:sourceip" && c.Op == "IpAddress" })
		if !restricted {
			return true
		}
	}
	return false
}
