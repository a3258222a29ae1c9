//go:build !race

package step

const raceEnabled = false
