//go:build race

package pipe

const raceEnabled = true
