//go:build race

package rdma

// raceEnabled scales slow loops down under the race detector.
const raceEnabled = true
