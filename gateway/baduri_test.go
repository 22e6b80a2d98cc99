package gateway

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// A request whose path or query holds a bad %-escape gets 400 InvalidURI
// as from S3, in an error document an XML parser accepts, whose message
// repeats none of the request's bytes (they may be any bytes at all).
func TestBadEscapeIsInvalidURI(t *testing.T) {
	g := uiGateway(t)
	for _, target := range []string{
		"/b/k%zz",
		"/b/k%",
		"/b/k?prefix=%zz",
		"/b?list-type=2&prefix=%\xff",
		"/b/k?x=%\xc3%",
		"/?x=%\xfe\xfd",
	} {
		// The request line is written from RequestURI as it stands,
		// raw bytes included; Go's URL parser would refuse the bad
		// escapes before they were sent.
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RequestURI = target
		resp, body := do(t, g, req)
		var e ErrorResponse
		if err := xml.Unmarshal([]byte(body), &e); err != nil {
			t.Errorf("%q: error document does not parse: %v\n%s", target, err, body)
			continue
		}
		if resp.StatusCode != http.StatusBadRequest || e.Code != "InvalidURI" {
			t.Errorf("%q: %d %s (%s), want 400 InvalidURI", target, resp.StatusCode, e.Code, e.Message)
		}
		if !utf8.ValidString(body) || strings.ContainsAny(e.Message, "%\\") {
			t.Errorf("%q: message %q repeats the request's bytes", target, e.Message)
		}
	}
}
