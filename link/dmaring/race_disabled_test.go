//go:build !race

package dmaring

const raceEnabled = false
