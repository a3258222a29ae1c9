//go:build !race

package tickwire_test

const raceEnabled = false
