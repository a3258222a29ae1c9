//go:build !race

package arb_test

const raceEnabled = false
