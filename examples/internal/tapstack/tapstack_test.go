package tapstack

import (
	"flag"
	"io"
	"net/netip"
	"testing"
)

func parse(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.RegisterFlags(fs, "tw9", "10.209.0.2/24", "10.209.0.1/24")
	return o, fs.Parse(args)
}

func TestRegisterFlagsDefaults(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Device: "tw9", Addr: netip.MustParsePrefix("10.209.0.2/24"), Host: netip.MustParsePrefix("10.209.0.1/24"), MTU: 1500, Link: LinkTAP, Queues: 1}
	if o != want {
		t.Fatalf("defaults %+v, want %+v", o, want)
	}
}

func TestRegisterFlagsValues(t *testing.T) {
	o, err := parse(t, "-tap", "x0", "-addr", "10.1.0.2/16", "-host", "", "-mtu", "1400", "-pcap", "f.pcap", "-link", "dmaring", "-queues", "4")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Device: "x0", Addr: netip.MustParsePrefix("10.1.0.2/16"), MTU: 1400, PcapFile: "f.pcap", Link: LinkDMARing, Queues: 4}
	if o != want {
		t.Fatalf("parsed %+v, want %+v", o, want)
	}
}

func TestRegisterFlagsBadPrefix(t *testing.T) {
	for _, args := range [][]string{{"-addr", "10.1.0.2"}, {"-host", "nonsense"}} {
		if _, err := parse(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
