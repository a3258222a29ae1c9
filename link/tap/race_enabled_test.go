//go:build race

package tap

// raceEnabled: under the race detector sync.Pool drops a share of the items
// put back, so pooled buffers show up as allocations.
const raceEnabled = true
