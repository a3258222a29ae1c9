//go:build !race

package mirror_test

const raceEnabled = false
