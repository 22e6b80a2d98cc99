package s3policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := Parse([]byte(doc), "site")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return p
}

func req(action, resource string, ctx ...string) Request {
	r := Request{Action: action, Resource: resource, Context: map[string]string{}}
	for i := 0; i+1 < len(ctx); i += 2 {
		r.Context[ctx[i]] = ctx[i+1]
	}
	return r
}

func TestEvaluate(t *testing.T) {
	publicPrefix := mustParse(t, `{"Version":"2012-10-17","Statement":[
		{"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/public/*"},
		{"Effect":"Allow","Principal":{"AWS":"*"},"Action":["s3:ListBucket"],"Resource":["arn:aws:s3:::site"],
		 "Condition":{"StringLike":{"s3:prefix":["public/*","public/"]}}}]}`)
	denies := mustParse(t, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":"*","Action":"s3:Get*","Resource":"arn:aws:s3:::site/*"},
		{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::site","arn:aws:s3:::site/*"],
		 "Condition":{"Bool":{"aws:SecureTransport":"false"}}},
		{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*",
		 "Condition":{"NotIpAddress":{"aws:SourceIp":["10.0.0.0/8","192.0.2.7"]}}},
		{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/secret?.txt"}]}`)
	strs := mustParse(t, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*",
		 "Condition":{"StringEquals":{"aws:Referer":["https://example.com/"]},"StringNotLike":{"aws:UserAgent":"*bot*"}}},
		{"Effect":"Deny","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::site",
		 "Condition":{"StringNotEqualsIgnoreCase":{"s3:delimiter":"/"}}}]}`)
	obj := func(k string) string { return "arn:aws:s3:::site/" + k }
	const bucket = "arn:aws:s3:::site"
	for _, c := range []struct {
		name string
		p    *Policy
		r    Request
		want Decision
	}{
		{"public object", publicPrefix, req("s3:GetObject", obj("public/a.png")), Allow},
		{"action names fold case", publicPrefix, req("s3:getobject", obj("public/a.png")), Allow},
		{"outside the prefix", publicPrefix, req("s3:GetObject", obj("private/a.png")), NoMatch},
		{"prefix is not a directory boundary", publicPrefix, req("s3:GetObject", obj("publicity")), NoMatch},
		{"other action", publicPrefix, req("s3:PutObject", obj("public/a.png")), NoMatch},
		{"list the public prefix", publicPrefix, req("s3:ListBucket", bucket, "s3:prefix", "public/x"), Allow},
		{"list elsewhere", publicPrefix, req("s3:ListBucket", bucket, "s3:prefix", "private/"), NoMatch},
		{"list without prefix", publicPrefix, req("s3:ListBucket", bucket), NoMatch},

		{"TLS from 10/8", denies, req("s3:GetObject", obj("a"), "aws:securetransport", "true", "aws:sourceip", "10.1.2.3"), Allow},
		{"plain HTTP denied", denies, req("s3:GetObject", obj("a"), "aws:securetransport", "false", "aws:sourceip", "10.1.2.3"), Deny},
		{"deny covers the bucket too", denies, req("s3:ListBucket", bucket, "aws:securetransport", "false"), Deny},
		{"outside the address ranges", denies, req("s3:GetObject", obj("a"), "aws:securetransport", "true", "aws:sourceip", "192.0.2.8"), Deny},
		{"the single address", denies, req("s3:GetObject", obj("a"), "aws:securetransport", "true", "aws:sourceip", "192.0.2.7"), Allow},
		{"IPv4-mapped IPv6", denies, req("s3:GetObject", obj("a"), "aws:securetransport", "true", "aws:sourceip", "::ffff:10.0.0.1"), Allow},
		{"no source address: NotIpAddress holds", denies, req("s3:GetObject", obj("a"), "aws:securetransport", "true"), Deny},
		{"Get* covers GetObjectAcl", denies, req("s3:GetObjectAcl", obj("a"), "aws:securetransport", "true"), Allow},
		{"? matches one character", denies, req("s3:GetObject", obj("secret1.txt"), "aws:securetransport", "true", "aws:sourceip", "10.0.0.1"), Deny},
		{"? does not match two", denies, req("s3:GetObject", obj("secret12.txt"), "aws:securetransport", "true", "aws:sourceip", "10.0.0.1"), Allow},

		{"referer and agent", strs, req("s3:GetObject", obj("a"), "aws:referer", "https://example.com/", "aws:useragent", "curl/8"), Allow},
		{"bot agent", strs, req("s3:GetObject", obj("a"), "aws:referer", "https://example.com/", "aws:useragent", "Googlebot/2"), NoMatch},
		{"no referer", strs, req("s3:GetObject", obj("a"), "aws:useragent", "curl/8"), NoMatch},
		{"missing key under a negated operator", strs, req("s3:GetObject", obj("a"), "aws:referer", "https://example.com/"), Allow},
		{"delimiter / (any case)", strs, req("s3:ListBucket", bucket, "s3:delimiter", "/"), NoMatch},
		{"other delimiter denied", strs, req("s3:ListBucket", bucket, "s3:delimiter", "-"), Deny},
		{"no delimiter denied", strs, req("s3:ListBucket", bucket), Deny},
	} {
		if got := c.p.Evaluate(c.r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	stmt := func(s string) string { return `{"Version":"2012-10-17","Statement":[` + s + `]}` }
	ok := `"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"`
	for _, c := range []struct {
		doc, reason string
	}{
		{`not json`, "not a policy document"},
		{`{"Statement":[{` + ok + `}]}`, "needs a Version"},
		{`{"Version":"2012-10-17"}`, "at least one Statement"},
		{`{"Version":"2012-10-17","Statement":[{` + ok + `}],"Extra":1}`, "not a policy document"},
		{stmt(`{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "Effect"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "only user/"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/r"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "only user/"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:user/dev/bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "not an access key ID"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:sts::123456789012:assumed-role/r/s"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "not an arn:aws:iam"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::*:user/bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "not an IAM ARN"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"RK*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "not an access key ID"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":[]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "Principal AWS"},
		{stmt(`{"Effect":"Allow","Principal":"RKQIRRF5PJGPSYIN4U74","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "Principal"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":"RK1","CanonicalUser":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "Principal"},
		{stmt(`{"Effect":"Allow","Principal":{"AWS":[` + strings.Repeat(`"k",`, MaxPrincipals) + `"k"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "at most"},
		{stmt(`{"Effect":"Allow","Principal":{"Service":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "Principal"},
		{stmt(`{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "needs a Principal"},
		{stmt(`{"Effect":"Allow","NotPrincipal":"*","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "NotPrincipal"},
		{stmt(`{"Effect":"Allow","Principal":"*","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}`), "NotAction"},
		{stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","NotResource":"arn:aws:s3:::site/*"}`), "NotResource"},
		{stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObjekt","Resource":"arn:aws:s3:::site/*"}`), "unknown action"},
		{stmt(`{"Effect":"Allow","Principal":"*","Action":"ec2:RunInstances","Resource":"arn:aws:s3:::site/*"}`), "not an s3 action"},
		{stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:Frob*","Resource":"arn:aws:s3:::site/*"}`), "matches no s3 action"},
		{stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}`), "not in bucket site"},
		{stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"site/*"}`), "not an arn"},
		{stmt(`{` + ok + `,"Condition":{"StringEquals":{"aws:PrincipalOrgID":"o-1"}}}`), "condition key"},
		{stmt(`{` + ok + `,"Condition":{"DateLessThan":{"aws:Referer":"x"}}}`), "operator"},
		{stmt(`{` + ok + `,"Condition":{"IpAddress":{"aws:SourceIp":"not-an-ip"}}}`), "not an IP"},
		{stmt(`{` + ok + `,"Condition":{"Bool":{"aws:SecureTransport":"yes"}}}`), "true or false"},
		{stmt(`{` + ok + `,"Condition":{"StringLikeIfExists":{"s3:prefix":"a"}}}`), "operator"},
		{`{"Version":"2012-10-17","Statement":[{` + ok + `,"Sid":"` + strings.Repeat("x", MaxSize) + `"}]}`, "at most"},
	} {
		_, err := Parse([]byte(c.doc), "site")
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, c.reason) {
			t.Errorf("%.120s: %v; want a refusal naming %q", c.doc, err, c.reason)
		}
	}
	// A single statement object, wildcard actions and a bare bucket ARN parse.
	for _, doc := range []string{
		`{"Version":"2008-10-17","Statement":{` + ok + `}}`,
		stmt(`{"Effect":"Deny","Principal":{"AWS":["*"]},"Action":"*","Resource":"*"}`),
		stmt(`{"Effect":"Allow","Principal":"*","Action":["s3:List*","s3:GetBucketLocation"],"Resource":"arn:aws:s3:::site"}`),
		stmt(`{` + ok + `,"Condition":{"IpAddress":{"aws:SourceIp":["2001:db8::/32","127.0.0.1"]},"Bool":{"aws:SecureTransport":true}}}`),
	} {
		if _, err := Parse([]byte(doc), "site"); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// TestPrincipals: statements naming access keys apply to the requests
// those keys sign, and to no other caller (anonymous ones included);
// "*" beside them is everyone.
func TestPrincipals(t *testing.T) {
	p := mustParse(t, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::000000000000:user/RKALICE","RKBOB"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/team/*"},
		{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/RKCAROL"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::site",
		 "Condition":{"StringLike":{"s3:prefix":"team/*"}}},
		{"Effect":"Deny","Principal":{"AWS":"RKBOB"},"Action":"s3:*","Resource":"arn:aws:s3:::site/team/secret/*"},
		{"Effect":"Allow","Principal":{"AWS":["RKDAVE","*"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/public/*"}]}`)
	if got := p.Principals(); !slices.Equal(got, []string{"RKALICE", "RKBOB", "RKCAROL"}) {
		t.Errorf("Principals() = %q", got)
	}
	as := func(who string, r Request) Request { r.Principal = who; return r }
	obj := func(k string) string { return "arn:aws:s3:::site/" + k }
	for _, c := range []struct {
		name string
		r    Request
		want Decision
	}{
		{"named by ARN", as("RKALICE", req("s3:GetObject", obj("team/a"))), Allow},
		{"named by ID", as("RKBOB", req("s3:GetObject", obj("team/a"))), Allow},
		{"another key", as("RKEVE", req("s3:GetObject", obj("team/a"))), NoMatch},
		{"anonymous", req("s3:GetObject", obj("team/a")), NoMatch},
		{"IDs are case-sensitive", as("rkalice", req("s3:GetObject", obj("team/a"))), NoMatch},
		{"outside the resource", as("RKALICE", req("s3:GetObject", obj("other/a"))), NoMatch},
		{"the deny names bob", as("RKBOB", req("s3:GetObject", obj("team/secret/x"))), Deny},
		{"and not alice", as("RKALICE", req("s3:GetObject", obj("team/secret/x"))), Allow},
		{"listing with a condition", as("RKCAROL", req("s3:ListBucket", "arn:aws:s3:::site", "s3:prefix", "team/x")), Allow},
		{"listing outside the condition", as("RKCAROL", req("s3:ListBucket", "arn:aws:s3:::site", "s3:prefix", "x")), NoMatch},
		{"listing, another key", as("RKALICE", req("s3:ListBucket", "arn:aws:s3:::site", "s3:prefix", "team/x")), NoMatch},
		{"* beside a key is everyone", req("s3:GetObject", obj("public/a")), Allow},
	} {
		if got := p.Evaluate(c.r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestIsPublic(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}`: true,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*",
			"Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}`: false,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::site/*",
			"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`: false,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"RKALICE"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}`:       false,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["RKALICE","*"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}`: true,
	} {
		if got := mustParse(t, doc).IsPublic(); got != want {
			t.Errorf("%s: public %v, want %v", doc, got, want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"a*", "abc", true}, {"*c", "abc", true}, {"a*c", "ac", true}, {"a*c", "ab", false},
		{"*", "", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false}, {"", "", true}, {"", "a", false}, {"abc", "abc", true},
	} {
		if got := match(c.p, c.s, false); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// BenchmarkEvaluate: a policy's decision for one request, with a
// statement for everyone and with one naming the most keys a statement
// may name (the caller last among them).
func BenchmarkEvaluate(b *testing.B) {
	keys := make([]string, MaxPrincipals)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"RK%018d"`, i)
	}
	for name, principal := range map[string]string{
		"everyone": `"*"`,
		"100-keys": `{"AWS":[` + strings.Join(keys, ",") + `]}`,
	} {
		p, err := Parse([]byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":`+principal+
			`,"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/team/*"}]}`), "site")
		if err != nil {
			b.Fatal(err)
		}
		r := req("s3:GetObject", "arn:aws:s3:::site/team/a.txt")
		r.Principal = fmt.Sprintf("RK%018d", MaxPrincipals-1)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p.Evaluate(r) != Allow {
					b.Fatal("not allowed")
				}
			}
		})
	}
}
