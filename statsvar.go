package tickwire

import "encoding/json"

// StatsVar is a Stack's counters as an expvar.Var: String returns a fresh
// Stats snapshot as a JSON object, one member per Stats field, named as
// the field. Publish it under a name of your choice:
//
//	expvar.Publish("tickwire", s.StatsVar())
//
// tickwire itself imports no expvar (whose import registers /debug/vars on
// net/http's DefaultServeMux) and publishes nothing: what is exported, and
// under which name, is the program's choice. Safe for concurrent use, like
// Stack.Stats; each String call allocates the JSON text.
type StatsVar struct {
	s *Stack
}

// StatsVar returns the Stack's counters as an expvar.Var.
func (s *Stack) StatsVar() *StatsVar { return &StatsVar{s: s} }

// String implements expvar.Var.String.
func (v *StatsVar) String() string {
	b, err := json.Marshal(v.s.Stats())
	if err != nil { // a struct of uint64s always marshals
		panic("tickwire: " + err.Error())
	}
	return string(b)
}
