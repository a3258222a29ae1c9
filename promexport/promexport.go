// Package promexport exports tickwire's counters to Prometheus: it
// implements prometheus.Collector for a Stack's Stats, a mirror
// Assembler's Stats and an SSE FeedDecoder's FeedStats. It is a package of
// its own so that only the programs that import it link
// github.com/prometheus/client_golang; tickwire, mirror and fast/sse never
// do (a test checks it).
//
//	s, err := tickwire.New(cfg)
//	prometheus.MustRegister(promexport.NewStackCollector(s, nil))
//	http.Handle("/metrics", promhttp.Handler())
//
// Each Stats field becomes one metric named tickwire_ plus the field name
// in snake case (tickwire_mirror_ and tickwire_sse_feed_ for the others):
// Stats.TCPRetransmits is the counter tickwire_tcp_retransmits_total and
// Stats.ConnsOpen the gauge tickwire_conns_open. The fields documented as
// gauges (Stats.ARPEntries, Stats.TCPTimeWait and Stats.ConnsOpen, mirror.Stats.ActiveFlows)
// are gauges, every other field a counter with the suffix _total. The help
// text names the field, whose doc comment says what it counts.
//
// A collector reads its source once per scrape (Collect): a Stack's Stats
// directly, as they are safe for concurrent use; an Assembler's or a
// FeedDecoder's through the function given, typically the Stats method of a
// mirror.StatsVar or sse.FeedStatsVar that the owning goroutine keeps
// current, since neither is safe for concurrent use.
package promexport

import (
	"reflect"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/mirror"
)

// NewStackCollector returns a Collector of s's Stats. labels are constant
// labels on every metric, to tell Stacks apart; nil labels the metrics with
// the Stack's address, as {addr="10.0.0.2"}.
func NewStackCollector(s *tickwire.Stack, labels prometheus.Labels) *Collector {
	if labels == nil {
		labels = prometheus.Labels{"addr": s.Addr().String()}
	}
	return newCollector("tickwire_", "tickwire.Stats", s.Stats, labels, "ARPEntries", "TCPTimeWait", "ConnsOpen")
}

// NewMirrorCollector returns a Collector of the mirror.Stats that stats
// returns, called once per scrape on the scraping goroutine: a
// mirror.StatsVar's Stats method, not the Assembler's. labels are constant
// labels on every metric (nil: none).
func NewMirrorCollector(stats func() mirror.Stats, labels prometheus.Labels) *Collector {
	return newCollector("tickwire_mirror_", "mirror.Stats", stats, labels, "ActiveFlows")
}

// NewFeedCollector returns a Collector of the sse.FeedStats that stats
// returns, called once per scrape on the scraping goroutine: an
// sse.FeedStatsVar's Stats method, not the FeedDecoder's. The STEP framing
// counters are named tickwire_sse_feed_step_... labels are constant labels
// on every metric (nil: none).
func NewFeedCollector(stats func() sse.FeedStats, labels prometheus.Labels) *Collector {
	return newCollector("tickwire_sse_feed_", "sse.FeedStats", stats, labels)
}

// Collector is a prometheus.Collector of one struct of uint64 counters: a
// metric per field. Safe for concurrent use if its source is.
type Collector struct {
	read    func() reflect.Value // the source's current value
	metrics []metric
}

var _ prometheus.Collector = (*Collector)(nil)

// metric is one field's descriptor.
type metric struct {
	index []int // the field, for reflect.Value.FieldByIndex
	desc  *prometheus.Desc
	kind  prometheus.ValueType
}

func newCollector[T any](prefix, typeName string, read func() T, labels prometheus.Labels, gauges ...string) *Collector {
	c := &Collector{read: func() reflect.Value { return reflect.ValueOf(read()) }}
	var walk func(t reflect.Type, index []int, prefix, path string)
	walk = func(t reflect.Type, index []int, prefix, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(append([]int(nil), index...), i)
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(f.Type, idx, prefix+snakeCase(f.Name)+"_", path+f.Name+".")
				continue
			case reflect.Uint64:
			default:
				panic("promexport: " + typeName + "." + path + f.Name + " is not a uint64")
			}
			name, kind := prefix+snakeCase(f.Name), prometheus.CounterValue
			help := typeName + "." + path + f.Name
			if isGauge(path+f.Name, gauges) {
				kind = prometheus.GaugeValue
				help += " (a gauge)"
			} else {
				name += "_total"
			}
			c.metrics = append(c.metrics, metric{
				index: idx,
				desc:  prometheus.NewDesc(name, help+": see its doc comment.", nil, labels),
				kind:  kind,
			})
		}
	}
	walk(reflect.TypeFor[T](), nil, prefix, "")
	return c
}

func isGauge(name string, gauges []string) bool {
	for _, g := range gauges {
		if g == name {
			return true
		}
	}
	return false
}

// Describe implements prometheus.Collector.Describe.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for i := range c.metrics {
		ch <- c.metrics[i].desc
	}
}

// Collect implements prometheus.Collector.Collect. It reads the source
// once.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	v := c.read()
	for i := range c.metrics {
		m := &c.metrics[i]
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(v.FieldByIndex(m.index).Uint()))
	}
}

// acronyms are the words written in capitals in tickwire's field names,
// longest first where one begins another.
var acronyms = []string{"ICMP", "IPv4", "STEP", "TCP", "UDP", "ARP", "SYN", "ACK", "RST", "FIN", "RTT", "MSS", "IP"}

// snakeCase turns a Go field name into a metric name part:
// "TCPSYNCookiesTx" is "tcp_syn_cookies_tx", "LatencyACKsMerged"
// "latency_acks_merged", "IPv4RxBytes" "ipv4_rx_bytes".
func snakeCase(name string) string {
	var words []string
	for rest := name; rest != ""; {
		n := wordLen(rest)
		words = append(words, strings.ToLower(rest[:n]))
		rest = rest[n:]
	}
	return strings.Join(words, "_")
}

// wordLen returns the length of the word that starts s.
func wordLen(s string) int {
	for _, a := range acronyms {
		if !strings.HasPrefix(s, a) {
			continue
		}
		n := len(a)
		if n < len(s) && s[n] == 's' && (n+1 == len(s) || isUpper(s[n+1])) {
			n++ // a plural: ACKs
		}
		if n == len(s) || !isLower(s[n]) {
			return n
		}
	}
	// An upper-case letter and the lower-case letters and digits after it,
	// or a run of upper-case letters up to the one that starts the next word.
	n := 1
	if n < len(s) && isUpper(s[n]) {
		for n < len(s) && isUpper(s[n]) && (n+1 == len(s) || !isLower(s[n+1])) {
			n++
		}
		return n
	}
	for n < len(s) && (isLower(s[n]) || s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return n
}

func isUpper(b byte) bool { return b >= 'A' && b <= 'Z' }
func isLower(b byte) bool { return b >= 'a' && b <= 'z' }
