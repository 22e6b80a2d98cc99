package main

import (
	"os"
	"testing"
)

func TestAdvertisedHTTP(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct{ listening, explicit, want string }{
		{"127.0.0.1:9100", "", "127.0.0.1:9100"},
		{"0.0.0.0:9100", "shard4:9100", "shard4:9100"},
		{"0.0.0.0:9100", "", host + ":9100"},
		{"[::]:9000", "", host + ":9000"},
	} {
		if got := advertisedHTTP(tc.listening, tc.explicit); got != tc.want {
			t.Errorf("advertisedHTTP(%q, %q) = %q, want %q", tc.listening, tc.explicit, got, tc.want)
		}
	}
}
