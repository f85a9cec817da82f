//go:build race

package broker

// raceEnabled: the race detector's build, whose crypto/rand allocates.
const raceEnabled = true
