// Package s3policy parses and evaluates S3 bucket policies: the subset
// regen enforces, and nothing else. A policy using anything outside that
// subset (a principal that is not everyone or an access key,
// NotPrincipal, NotAction, NotResource, an unknown action, a condition
// operator or key regen does not evaluate) is refused at parse time with
// the reason, so that a policy is never stored and then silently
// half-applied.
//
// What is supported:
//
//   - Principal "*" (or {"AWS": "*"}): the statement applies to every
//     caller, signed or anonymous, as S3 reads it.
//   - Principal {"AWS": [...]} naming access keys, each by its access key
//     ID, plain ("RKQIRRF5PJGPSYIN4U74") or as an IAM user ARN
//     ("arn:aws:iam::ACCOUNT:user/RKQIRRF5PJGPSYIN4U74"; regen has one
//     account, so ACCOUNT is not checked): the statement applies to the
//     requests those keys sign, never to anonymous ones. Keys are named
//     by ID, not by name, because a name can be given again to a new key.
//   - Effect Allow and Deny; an explicit Deny wins over any Allow.
//   - Action: s3 action names and patterns with * and ? ("s3:Get*").
//   - Resource: ARNs of the policy's own bucket, "arn:aws:s3:::bucket" and
//     "arn:aws:s3:::bucket/key-pattern", with * and ?.
//   - Condition operators StringEquals, StringNotEquals, StringLike,
//     StringNotLike, StringEqualsIgnoreCase, StringNotEqualsIgnoreCase,
//     Bool, IpAddress, NotIpAddress, on the keys aws:SecureTransport,
//     aws:SourceIp, aws:Referer, aws:UserAgent, s3:prefix, s3:delimiter.
//
// The package is pure: the caller describes a request (Request) and gets
// a Decision.
package s3policy
