package tickwire_test

import (
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gethernet "gvisor.dev/gvisor/pkg/tcpip/link/ethernet"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/pipe"
)

// TestInlineLinkStackRoom: a stack on link/pipe, directly or through the
// recorder, makes stack room before a dial or a close (the pipe delivers
// inline); one on a link that queues its frames does not.
func TestInlineLinkStackRoom(t *testing.T) {
	pa, pb := pipe.New(pipe.Options{})
	defer pb.Close()
	rec, err := recorder.New(pb, nil)
	if err != nil {
		t.Fatal(err)
	}
	queued := gethernet.New(channel.New(16, 1514, tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0c")))
	for _, tc := range []struct {
		name   string
		cfg    tickwire.Config
		inline bool
	}{
		{"pipe", tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: addrA}, true},
		{"recorder over pipe", tickwire.Config{Link: rec, MAC: pb.MAC(), Addr: addrB}, true},
		{"channel", tickwire.Config{Link: queued, MAC: []byte("\x02\x00\x00\x00\x00\x0c"), Addr: addrA}, false},
	} {
		s, err := newStack(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := tickwire.InlineLink(s); got != tc.inline {
			t.Errorf("%s: stack room made: %v, want %v", tc.name, got, tc.inline)
		}
		s.Close()
	}
}
