//go:build !race && !purego

package fast

// raceEnabled: see tape_asm_race_amd64_test.go.
const raceEnabled = false
