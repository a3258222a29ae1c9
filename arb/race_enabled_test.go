//go:build race

package arb_test

const raceEnabled = true
