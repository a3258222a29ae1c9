package promexport_test

import (
	"fmt"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/link/pipe"
	"github.com/tickwire/tickwire/mirror"
	"github.com/tickwire/tickwire/promexport"
)

// A Stack's counters in a Prometheus registry, which promhttp.HandlerFor
// serves on /metrics.
func ExampleNewStackCollector() {
	a, _ := pipe.New(pipe.Options{})
	s, err := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promexport.NewStackCollector(s, nil))

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if name := f.GetName(); name == "tickwire_conns_open" || name == "tickwire_tcp_retransmits_total" {
			m := f.GetMetric()[0]
			fmt.Println(name, f.GetType(), m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue())
		}
	}
	// Output:
	// tickwire_conns_open GAUGE addr 10.0.0.1
	// tickwire_tcp_retransmits_total COUNTER addr 10.0.0.1
}

// An Assembler's and a FeedDecoder's counters, read through the StatsVars
// their goroutine keeps current.
func ExampleNewMirrorCollector() {
	var mv mirror.StatsVar
	var fv sse.FeedStatsVar
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		promexport.NewMirrorCollector(mv.Stats, prometheus.Labels{"capture": "eth1"}),
		promexport.NewFeedCollector(fv.Stats, prometheus.Labels{"capture": "eth1"}),
	)
	// The capture goroutine, after each batch of frames:
	mv.Set(mirror.Stats{Frames: 64, ActiveFlows: 2})
	fv.Set(sse.FeedStats{Trades: 10})

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "tickwire_mirror_frames_total", "tickwire_mirror_active_flows", "tickwire_sse_feed_trades_total":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue()+f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// tickwire_mirror_active_flows 2
	// tickwire_mirror_frames_total 64
	// tickwire_sse_feed_trades_total 10
}
