//go:build race

package pcap

// raceEnabled scales slow loops down under the race detector.
const raceEnabled = true
