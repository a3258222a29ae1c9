package sse_test

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/tickwire/tickwire/fast/sse"
)

// TestFeedStatsVar checks that FeedStatsVar's JSON follows Set, STEP's
// counters nested, and that Set allocates nothing.
func TestFeedStatsVar(t *testing.T) {
	var v sse.FeedStatsVar
	var _ expvar.Var = &v
	fe := sse.NewFeedEncoder()
	stream, err := fe.AppendOrders(nil, []sse.Order{{OrderIndex: 1, SecurityID: sse.SecurityID("600000"), OrderType: 'A', OrderBSFlag: 'B'}})
	if err != nil {
		t.Fatal(err)
	}
	fd := sse.NewFeedDecoder(sse.FeedConfig{}, quiet{})
	if err := fd.Feed(stream); err != nil {
		t.Fatal(err)
	}
	v.Set(fd.Stats())
	var got sse.FeedStats
	if err := json.Unmarshal([]byte(v.String()), &got); err != nil {
		t.Fatal(err)
	}
	if got != fd.Stats() || got.Orders != 1 || got.STEP.Messages != 1 {
		t.Errorf("JSON decodes to %+v, want %+v", got, fd.Stats())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v.String()), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["STEP"].(map[string]any)["Messages"]; !ok {
		t.Errorf("no STEP.Messages in %s", v.String())
	}
	s := fd.Stats()
	if n := testing.AllocsPerRun(100, func() { v.Set(s) }); n != 0 {
		t.Errorf("Set allocates %v times", n)
	}
}

type quiet struct{}

func (quiet) OnTrade(*sse.Trade)           {}
func (quiet) OnOrder(*sse.Order)           {}
func (quiet) OnGap(uint32, uint64, uint64) {}
