//go:build race

package codec

// raceEnabled is true under go test -race.
const raceEnabled = true
