package tickwire_test

import (
	"encoding/json"
	"expvar"
	"reflect"
	"testing"

	"github.com/tickwire/tickwire"
)

// TestStatsVar checks that a published StatsVar names every Stats field
// and that its values follow the traffic.
func TestStatsVar(t *testing.T) {
	p := newPair(t, nil)
	p.serveEcho(t)
	v := p.a.StatsVar()
	var _ expvar.Var = v
	expvar.Publish("tickwire-test-statsvar", v) // expvar has no Unpublish: once per process
	decode := func() map[string]uint64 {
		t.Helper()
		var m map[string]uint64
		if err := json.Unmarshal([]byte(expvar.Get("tickwire-test-statsvar").String()), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := decode()
	st := reflect.TypeFor[tickwire.Stats]()
	for i := range st.NumField() {
		if _, ok := before[st.Field(i).Name]; !ok {
			t.Errorf("the JSON lacks %s", st.Field(i).Name)
		}
	}
	if len(before) != st.NumField() {
		t.Errorf("the JSON has %d members, Stats %d fields", len(before), st.NumField())
	}
	c := p.dialEcho(t)
	ping(t, c, "hello")
	settled(func() bool { return p.a.Stats().ConnsDialed == 1 })
	after := decode()
	for _, name := range []string{"EthernetTxPackets", "TCPRxBytes", "ConnsDialed"} {
		if after[name] <= before[name] {
			t.Errorf("%s did not move: %d, then %d", name, before[name], after[name])
		}
	}
	if after["ConnsOpen"] != 1 {
		t.Errorf("ConnsOpen = %d, want 1", after["ConnsOpen"])
	}
}
