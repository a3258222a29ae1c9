//go:build !race

package nicsim_test

const raceEnabled = false
