package sse

import (
	"encoding/json"
	"sync"
)

// FeedStatsVar holds a copy of a FeedDecoder's FeedStats (or of a sum the
// program made of several) for another goroutine to read, and is an
// expvar.Var: String returns the copy as a JSON object with the FeedStats
// field names, STEP's counters as a nested object. A FeedDecoder is not safe
// for concurrent use, so its goroutine copies its stats in with Set, as
// often as the program wants the export fresh:
//
//	var v sse.FeedStatsVar
//	expvar.Publish("feed", &v)
//	fd.Feed(chunk)
//	v.Set(fd.Stats())
//
// The package imports no expvar and publishes nothing. The zero value is
// ready; a FeedStatsVar must not be copied after first use. All methods
// are safe for concurrent use.
type FeedStatsVar struct {
	mu sync.Mutex
	s  FeedStats
}

// Set replaces the copy with s. It allocates nothing.
func (v *FeedStatsVar) Set(s FeedStats) {
	v.mu.Lock()
	v.s = s
	v.mu.Unlock()
}

// Stats returns the copy Set stored last.
func (v *FeedStatsVar) Stats() FeedStats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.s
}

// String implements expvar.Var.String.
func (v *FeedStatsVar) String() string {
	b, err := json.Marshal(v.Stats())
	if err != nil { // structs of uint64s always marshal
		panic("sse: " + err.Error())
	}
	return string(b)
}
