package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The admin commands must say what is wrong when the endpoint or the
// credentials are, not print a bare HTTP status.
func TestAdminErrors(t *testing.T) {
	notGateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer notGateway.Close()
	htmlOK := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>a web server</html>"))
	}))
	defer htmlOK.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`<?xml version="1.0"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>`))
	}))
	defer refusing.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no secret", []string{"status", "--endpoint", notGateway.URL, "--secret-key", ""}, "no credentials"},
		{"no access key", []string{"nodes", "--endpoint", notGateway.URL, "--access-key", ""}, "no credentials"},
		{"not a URL", []string{"status", "--endpoint", "127.0.0.1:9000"}, "want a URL"},
		{"nobody listening", []string{"status", "--endpoint", closed}, "cannot reach the gateway"},
		{"not a gateway", []string{"status", "--endpoint", notGateway.URL}, "not like a regen gateway"},
		{"not JSON", []string{"status", "--endpoint", htmlOK.URL}, "other than regen's admin JSON"},
		{"wrong credentials", []string{"status", "--endpoint", refusing.URL}, "refused the credentials"},
		{"set-code arity", []string{"bucket", "set-code", "photos", "--endpoint", notGateway.URL}, "usage: regen admin bucket set-code"},
		{"unknown command", []string{"frobnicate"}, "usage: regen admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runAdmin(context.Background(), tc.args, &strings.Builder{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("regen admin %v: error %v, want one saying %q", tc.args, err, tc.want)
			}
		})
	}
}
