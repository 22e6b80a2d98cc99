package gateway

import (
	"testing"

	"github.com/regen-s3/regen/metadata"
)

func TestMatchCORS(t *testing.T) {
	age := 600
	rules := []metadata.CORSRule{
		{ID: "app", AllowedOrigins: []string{"https://app.example.com", "http://*.dev.example.com"}, AllowedMethods: []string{"GET", "PUT"},
			AllowedHeaders: []string{"content-type", "x-amz-*"}, MaxAgeSeconds: &age},
		{ID: "any-get", AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"}},
	}
	for _, c := range []struct {
		origin, method string
		headers        []string
		want           string
	}{
		{"https://app.example.com", "PUT", []string{"content-type"}, "app"},
		{"https://app.example.com", "PUT", []string{"Content-Type", "x-amz-meta-a"}, "app"},
		{"https://app.example.com", "PUT", []string{"authorization"}, ""},
		{"http://a.dev.example.com", "GET", nil, "app"},
		{"http://dev.example.com", "PUT", nil, ""}, // the wildcard needs its "." prefix
		{"https://evil.example.org", "GET", nil, "any-get"},
		{"https://evil.example.org", "PUT", nil, ""},
		{"https://evil.example.org", "GET", []string{"x-custom"}, ""},
		{"https://app.example.com", "DELETE", nil, ""},
	} {
		r := matchCORS(rules, c.origin, c.method, c.headers)
		got := ""
		if r != nil {
			got = r.ID
		}
		if got != c.want {
			t.Errorf("%s %s %v: rule %q, want %q", c.origin, c.method, c.headers, got, c.want)
		}
	}
}

func TestCORSRulesValidate(t *testing.T) {
	ok := CORSXML{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}}
	for _, c := range []struct {
		name  string
		rules []CORSXML
		code  string
	}{
		{"none", nil, "MalformedXML"},
		{"no origin", []CORSXML{{AllowedMethods: []string{"GET"}}}, "MalformedXML"},
		{"no method", []CORSXML{{AllowedOrigins: []string{"*"}}}, "MalformedXML"},
		{"bad method", []CORSXML{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"PATCH"}}}, "InvalidRequest"},
		{"two wildcards", []CORSXML{{AllowedOrigins: []string{"http://*.*.com"}, AllowedMethods: []string{"GET"}}}, "InvalidRequest"},
		{"too many", make([]CORSXML, 101), "MalformedXML"},
		{"fine", []CORSXML{ok}, ""},
	} {
		_, err := corsRules(&corsInput{Rules: c.rules})
		got := ""
		if ae := AsAPIError(err); ae != nil {
			got = ae.Code
		}
		if got != c.code {
			t.Errorf("%s: %v, want %q", c.name, err, c.code)
		}
	}
}
