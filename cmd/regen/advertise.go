package main

import (
	"net"
	"os"
)

// advertisedHTTP is the HTTP address peers should use: the explicit one if
// given; else, for a wildcard listener (0.0.0.0 or [::], as in a
// container), this host's name with the listening port, since the wildcard
// address is of no use to a peer; else the listening address.
func advertisedHTTP(listening, explicit string) string {
	if explicit != "" {
		return explicit
	}
	host, port, err := net.SplitHostPort(listening)
	if err != nil {
		return listening
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listening
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return listening
	}
	return net.JoinHostPort(name, port)
}
