//go:build race

package server

// raceEnabled says the test binary was built with -race.
const raceEnabled = true
