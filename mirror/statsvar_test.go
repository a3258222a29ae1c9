package mirror_test

import (
	"encoding/json"
	"expvar"
	"reflect"
	"testing"

	"github.com/tickwire/tickwire/mirror"
)

type discard struct{}

func (discard) FlowStart(mirror.FlowKey, int64)                 {}
func (discard) Data(mirror.FlowKey, uint64, []byte, int64)      {}
func (discard) Gap(mirror.FlowKey, uint64, uint64, int64)       {}
func (discard) FlowEnd(mirror.FlowKey, mirror.EndReason, int64) {}

// TestStatsVar checks that StatsVar's JSON names every Stats field and
// follows Set, and that Set allocates nothing.
func TestStatsVar(t *testing.T) {
	a, err := mirror.New(mirror.Config{Checksum: mirror.ChecksumIgnore}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	var v mirror.StatsVar
	var _ expvar.Var = &v
	decode := func() map[string]uint64 {
		t.Helper()
		var m map[string]uint64
		if err := json.Unmarshal([]byte(v.String()), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	st := reflect.TypeFor[mirror.Stats]()
	m := decode()
	for i := range st.NumField() {
		if _, ok := m[st.Field(i).Name]; !ok {
			t.Errorf("the JSON lacks %s", st.Field(i).Name)
		}
	}
	if len(m) != st.NumField() {
		t.Errorf("the JSON has %d members, Stats %d fields", len(m), st.NumField())
	}
	a.HandleIPv4(tcpPacket(100, 0x02, ""), 0)
	a.HandleIPv4(tcpPacket(101, 0x10, "hello"), 1)
	v.Set(a.Stats())
	m = decode()
	if m["Frames"] != 2 || m["DeliveredBytes"] != 5 || m["ActiveFlows"] != 1 {
		t.Errorf("Frames, DeliveredBytes, ActiveFlows = %d, %d, %d; want 2, 5, 1", m["Frames"], m["DeliveredBytes"], m["ActiveFlows"])
	}
	if v.Stats() != a.Stats() {
		t.Error("Stats differs from what Set stored")
	}
	s := a.Stats()
	if n := testing.AllocsPerRun(100, func() { v.Set(s) }); n != 0 {
		t.Errorf("Set allocates %v times", n)
	}
}
