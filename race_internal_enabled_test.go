//go:build race

package tickwire

const raceEnabled = true
