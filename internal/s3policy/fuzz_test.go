package s3policy

import (
	"errors"
	"testing"
)

// FuzzParse: any document a client sends to PUT ?policy is either refused
// with a *Error (MalformedPolicy) or parsed into a policy that evaluates
// any request without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":{"AWS":["*"]},"Action":["s3:*"],"Resource":["arn:aws:s3:::site","arn:aws:s3:::site/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::site","Condition":{"StringLike":{"s3:prefix":["public/*"]},"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::000000000000:user/RKALICE","RKBOB"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}`,
		`{"Statement":{}}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s), "s3:GetObject", "arn:aws:s3:::site/public/a", "10.1.2.3")
	}
	f.Fuzz(func(t *testing.T, doc []byte, action, resource, ip string) {
		p, err := Parse(doc, "site")
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %T %v is not a *Error (MalformedPolicy)", err, err)
			}
			return
		}
		for _, who := range []string{"", "RKBOB"} {
			p.Evaluate(Request{Principal: who, Action: action, Resource: resource, Context: map[string]string{"aws:sourceip": ip, "aws:securetransport": "true", "s3:prefix": resource}})
		}
		p.Principals()
		p.IsPublic()
	})
}
