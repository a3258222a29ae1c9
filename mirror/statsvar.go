package mirror

import (
	"encoding/json"
	"sync"
)

// StatsVar holds a copy of an Assembler's Stats for another goroutine to
// read, and is an expvar.Var: String returns the copy as a JSON object,
// one member per Stats field, named as the field. An Assembler is not safe
// for concurrent use, so its goroutine copies its Stats in with Set, as
// often as the program wants the export fresh (each frame costs a mutex
// and a 256-byte copy; every batch of frames or every second is plenty):
//
//	var v mirror.StatsVar
//	expvar.Publish("mirror", &v)
//	for ... {
//		a.HandleFrame(frame, ts)
//		v.Set(a.Stats())
//	}
//
// The package imports no expvar and publishes nothing. The zero value is
// ready (all counters zero); a StatsVar must not be copied after first use.
// All methods are safe for concurrent use.
type StatsVar struct {
	mu sync.Mutex
	s  Stats
}

// Set replaces the copy with s. It allocates nothing.
func (v *StatsVar) Set(s Stats) {
	v.mu.Lock()
	v.s = s
	v.mu.Unlock()
}

// Stats returns the copy Set stored last.
func (v *StatsVar) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.s
}

// String implements expvar.Var.String.
func (v *StatsVar) String() string {
	b, err := json.Marshal(v.Stats())
	if err != nil { // a struct of uint64s always marshals
		panic("mirror: " + err.Error())
	}
	return string(b)
}
