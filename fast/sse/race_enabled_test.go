//go:build race

package sse

// raceEnabled: the race detector makes sync.Pool drop a share of what is
// put in it, so allocation counts are not meaningful.
const raceEnabled = true
