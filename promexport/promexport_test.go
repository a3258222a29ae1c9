package promexport_test

import (
	"context"
	"io"
	"net/netip"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/link/pipe"
	"github.com/tickwire/tickwire/mirror"
	"github.com/tickwire/tickwire/promexport"
)

// newPair returns two stacks joined by a pipe, B serving TCP echo on port
// 7, closed at the end of the test.
func newPair(t testing.TB) (a, b *tickwire.Stack) {
	t.Helper()
	pa, pb := pipe.New(pipe.Options{})
	a, err := tickwire.New(tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	b, err = tickwire.New(tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		a.Close()
		b.Close()
	})
	return a, b
}

// TestStackCollector checks the Stack collector against a live Stack: one
// metric per Stats field, gauges and counters as documented, values that
// follow the traffic, and metrics that pass Prometheus's lint.
func TestStackCollector(t *testing.T) {
	a, _ := newPair(t)
	col := promexport.NewStackCollector(a, nil)
	fields := reflect.TypeFor[tickwire.Stats]().NumField()
	if n := testutil.CollectAndCount(col); n != fields {
		t.Errorf("%d metrics, want %d (one per Stats field)", n, fields)
	}
	lint(t, col)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:7"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP tickwire_conns_dialed_total tickwire.Stats.ConnsDialed: see its doc comment.
# TYPE tickwire_conns_dialed_total counter
tickwire_conns_dialed_total{addr="10.0.0.1"} 1
# HELP tickwire_conns_open tickwire.Stats.ConnsOpen (a gauge): see its doc comment.
# TYPE tickwire_conns_open gauge
tickwire_conns_open{addr="10.0.0.1"} 1
# HELP tickwire_arp_entries tickwire.Stats.ARPEntries (a gauge): see its doc comment.
# TYPE tickwire_arp_entries gauge
tickwire_arp_entries{addr="10.0.0.1"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"tickwire_conns_dialed_total", "tickwire_conns_open", "tickwire_arp_entries"); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(prometheus.Collector(onlyMetric(col, "tickwire_tcp_tx_bytes_total"))); v == 0 {
		t.Error("tickwire_tcp_tx_bytes_total is 0 after a write")
	}

	// Two Stacks register side by side, told apart by their addresses.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	a2, _ := newPair(t)
	if err := reg.Register(promexport.NewStackCollector(a2, nil)); err == nil {
		t.Error("a second Stack with the same address registered")
	}
	if err := reg.Register(promexport.NewStackCollector(a2, prometheus.Labels{"addr": "other"})); err != nil {
		t.Error(err)
	}
}

// lint runs Prometheus's linter on col's metrics. It reads the "us" of
// tickwire_drop_ipv4_not_for_us_total (Stats.DropIPv4NotForUs: packets
// not for us) as microseconds, which is the one problem it may report.
func lint(t *testing.T, col prometheus.Collector) {
	t.Helper()
	problems, err := testutil.CollectAndLint(col)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if p.Metric != "tickwire_drop_ipv4_not_for_us_total" {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// onlyMetric is a Collector of c's metric named name.
func onlyMetric(c prometheus.Collector, name string) prometheus.Collector {
	return filter{c, name}
}

type filter struct {
	c    prometheus.Collector
	name string
}

func (f filter) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }
func (f filter) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() {
		f.c.Collect(all)
		close(all)
	}()
	for m := range all {
		if strings.Contains(m.Desc().String(), `fqName: "`+f.name+`"`) {
			ch <- m
		}
	}
}

// TestMirrorCollector checks the mirror collector's names and kinds.
func TestMirrorCollector(t *testing.T) {
	var v mirror.StatsVar
	v.Set(mirror.Stats{Frames: 3, ActiveFlows: 2, DeliveredBytes: 100})
	col := promexport.NewMirrorCollector(v.Stats, prometheus.Labels{"port": "eth1"})
	if n, fields := testutil.CollectAndCount(col), reflect.TypeFor[mirror.Stats]().NumField(); n != fields {
		t.Errorf("%d metrics, want %d", n, fields)
	}
	lint(t, col)
	want := `
# HELP tickwire_mirror_active_flows mirror.Stats.ActiveFlows (a gauge): see its doc comment.
# TYPE tickwire_mirror_active_flows gauge
tickwire_mirror_active_flows{port="eth1"} 2
# HELP tickwire_mirror_delivered_bytes_total mirror.Stats.DeliveredBytes: see its doc comment.
# TYPE tickwire_mirror_delivered_bytes_total counter
tickwire_mirror_delivered_bytes_total{port="eth1"} 100
# HELP tickwire_mirror_ipv4_checksum_bad_total mirror.Stats.IPv4ChecksumBad: see its doc comment.
# TYPE tickwire_mirror_ipv4_checksum_bad_total counter
tickwire_mirror_ipv4_checksum_bad_total{port="eth1"} 0
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"tickwire_mirror_active_flows", "tickwire_mirror_delivered_bytes_total", "tickwire_mirror_ipv4_checksum_bad_total"); err != nil {
		t.Error(err)
	}
}

// TestFeedCollector checks the feed collector's names, STEP's nested.
func TestFeedCollector(t *testing.T) {
	var v sse.FeedStatsVar
	var fs sse.FeedStats
	fs.Trades, fs.STEP.Messages = 7, 9
	v.Set(fs)
	col := promexport.NewFeedCollector(v.Stats, nil)
	lint(t, col)
	want := `
# HELP tickwire_sse_feed_step_messages_total sse.FeedStats.STEP.Messages: see its doc comment.
# TYPE tickwire_sse_feed_step_messages_total counter
tickwire_sse_feed_step_messages_total 9
# HELP tickwire_sse_feed_trades_total sse.FeedStats.Trades: see its doc comment.
# TYPE tickwire_sse_feed_trades_total counter
tickwire_sse_feed_trades_total 7
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"tickwire_sse_feed_step_messages_total", "tickwire_sse_feed_trades_total"); err != nil {
		t.Error(err)
	}
}

// TestNames checks the snake-case names of every Stats field against a
// few written out, and that no two fields share a name.
func TestNames(t *testing.T) {
	a, _ := newPair(t)
	names := map[string]bool{}
	for _, col := range []prometheus.Collector{
		promexport.NewStackCollector(a, nil),
		promexport.NewMirrorCollector(func() mirror.Stats { return mirror.Stats{} }, nil),
		promexport.NewFeedCollector(func() sse.FeedStats { return sse.FeedStats{} }, nil),
	} {
		ch := make(chan *prometheus.Desc, 200)
		col.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			name := s[strings.Index(s, `fqName: "`)+9:]
			name = name[:strings.IndexByte(name, '"')]
			if names[name] {
				t.Errorf("%s twice", name)
			}
			names[name] = true
		}
	}
	for _, want := range []string{
		"tickwire_tcp_syn_cookies_tx_total", "tickwire_latency_acks_merged_total", "tickwire_latency_ack_evictions_total",
		"tickwire_ipv4_rx_bytes_total", "tickwire_tcp_no_ack_rx_total", "tickwire_drop_ipv4_frag_timeout_total",
		"tickwire_icmp_echo_requests_rx_total", "tickwire_drop_tcp_syn_source_total", "tickwire_conns_refused_per_source_total",
		"tickwire_sse_feed_step_untracked_categories_total", "tickwire_mirror_non_tcp_total",
	} {
		if !names[want] {
			t.Errorf("no metric %s", want)
		}
	}
	if t.Failed() {
		t.Log(names)
	}
}

// TestNoClientGolangElsewhere checks that the packages other than this one
// do not link client_golang, nor expvar: a program that does not import
// promexport gets neither.
func TestNoClientGolangElsewhere(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "..", "../mirror/...", "../fast/...", "../link/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/prometheus/") || pkg == "expvar" {
			t.Errorf("%s is linked by tickwire's packages", pkg)
		}
	}
}
