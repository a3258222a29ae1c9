//go:build race

package tickwire_test

// raceEnabled scales slow loops down under the race detector.
const raceEnabled = true
