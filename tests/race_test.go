//go:build race

package tests

// Under `go test -race` the regen binary the tests start is built with
// -race too, so data races in the servers fail the run (CI's short race
// run), not only races in the test process.
func init() { raceBuild = true }
