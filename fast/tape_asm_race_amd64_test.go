//go:build race && !purego

package fast

// raceEnabled: the race detector slows the differential tests tenfold and
// sees nothing in the assembly, which it does not instrument.
const raceEnabled = true
