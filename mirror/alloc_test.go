package mirror_test

import (
	"testing"

	"github.com/tickwire/tickwire/internal/captest"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// TestSteadyStateDoesNotAllocate asserts zero allocations per frame for
// in-order and reordered input, with and without history, and with a lossy
// stream whose gaps are skipped by the buffer bound: Ethernet frames through
// HandleFrame, and the same packets in the other link types through
// HandleLinkFrame.
func TestSteadyStateDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	cases := []struct {
		name    string
		reorder float64
		loss    int // drop every loss-th frame (0: none)
		cfg     mirror.Config
	}{
		{"in order", 0, 0, mirror.Config{}},
		{"reordered 10%", 0.10, 0, mirror.Config{}},
		{"in order with history", 0, 0, mirror.Config{History: true}},
		{"reordered 30% with history", 0.30, 0, mirror.Config{History: true}},
		{"lossy, small buffer", 0.10, 7, mirror.Config{BufferPerFlow: 4096}},
		{"checksum ignored", 0.10, 0, mirror.Config{Checksum: mirror.ChecksumIgnore}},
	}
	links := append([]uint16{frame.LinkTypeEthernet}, convertedLinkTypes...)
	for _, c := range cases {
		for _, link := range links {
			t.Run(c.name+"/"+frame.LinkTypeName(link), func(t *testing.T) {
				steadyStateAllocs(t, c.reorder, c.loss, c.cfg, link)
			})
		}
	}
}

// steadyStateAllocs is one case of TestSteadyStateDoesNotAllocate.
func steadyStateAllocs(t *testing.T, reorder float64, loss int, cfg mirror.Config, link uint16) {
	feed := newBenchFeed(reorder, 1, benchFramesCold)
	handle := func(a *mirror.Assembler, f []byte, ts int64) error { return a.HandleFrame(f, ts) }
	if link != frame.LinkTypeEthernet {
		for i, f := range feed.frames {
			feed.frames[i], _ = captest.FromEthernet(f, link)
		}
		for i, f := range feed.syns {
			feed.syns[i], _ = captest.FromEthernet(f, link)
		}
		handle = func(a *mirror.Assembler, f []byte, ts int64) error { return a.HandleLinkFrame(link, f, ts) }
	}
	h := &nopHandler{}
	a, err := mirror.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := handle(a, feed.syns[0], 1); err != nil {
		t.Fatal(err)
	}
	pos := 0
	ts := int64(2)
	step := func() {
		if loss == 0 || pos%loss != 3 {
			if err := handle(a, feed.frames[feed.order[pos]], ts); err != nil {
				t.Fatal(err)
			}
		}
		pos++
		ts += 1000
	}
	for range 100 { // warm up: the reassembly buffer is allocated once
		step()
	}
	if n := testing.AllocsPerRun(3000, step); n != 0 {
		t.Fatalf("%v allocations per frame", n)
	}
	if h.bytes == 0 {
		t.Fatal("nothing delivered")
	}
	if loss != 0 && a.Stats().Gaps == 0 {
		t.Fatal("lossy case produced no gap")
	}
}

// aliasHandler records where the first byte of each Data call lives.
type aliasHandler struct {
	nopHandler
	first []*byte
}

func (h *aliasHandler) Data(k mirror.FlowKey, off uint64, data []byte, ts int64) {
	h.first = append(h.first, &data[0])
}

// TestInOrderDataAliasesTheFrame: in-order data reaches the Handler as a
// slice of the frame itself, not a copy; held data comes from the buffer.
func TestInOrderDataAliasesTheFrame(t *testing.T) {
	for _, cfg := range []mirror.Config{{}, {History: true}} {
		h := &aliasHandler{}
		a, _ := mirror.New(cfg, h)
		_ = a.HandleFrame(ethernet(appendIPv4(nil, ab(100, fSYN, ""))), 0)
		inOrder := ethernet(appendIPv4(nil, ab(101, 0, "abcd")))
		ahead := ethernet(appendIPv4(nil, ab(109, 0, "ijkl")))
		filler := ethernet(appendIPv4(nil, ab(105, 0, "efgh")))
		for _, fr := range [][]byte{inOrder, ahead, filler} {
			if err := a.HandleFrame(fr, 1); err != nil {
				t.Fatal(err)
			}
		}
		payload := 14 + 20 + 20
		if len(h.first) != 3 || h.first[0] != &inOrder[payload] || h.first[1] != &filler[payload] || h.first[2] == &ahead[payload] {
			t.Fatalf("%+v: Data did not alias the in-order frames (or aliased a held one)", cfg)
		}
	}
}
