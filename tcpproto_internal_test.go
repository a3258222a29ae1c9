package tickwire

import "testing"

// TestFloodGate: a listener that never refused admits everything; once
// flooded, a burst of floodAdmitBurst, then floodAdmitRate a second; a
// floodHold after its last refusal, everything again.
func TestFloodGate(t *testing.T) {
	g := newFloodGate()
	const t0 = int64(5e9)
	for i := range 10000 {
		if !g.allow(t0 + int64(i)) {
			t.Fatalf("segment %d refused by a listener never flooded", i)
		}
	}
	if g.active.Load() || !g.allowNow() || !g.openNow() {
		t.Error("a listener never flooded is active, or refused")
	}
	g.flooded(t0)
	if !g.active.Load() {
		t.Error("a flooded listener is not active: allowNow would skip its bucket")
	}
	taken := 0
	for g.allow(t0) {
		taken++
		if taken > 10*floodAdmitBurst {
			break
		}
	}
	if taken != floodAdmitBurst {
		t.Errorf("flooded: %d segments taken at once, want the burst %d", taken, floodAdmitBurst)
	}
	if g.open(t0) {
		t.Error("open with an empty bucket")
	}
	// 10 ms later: 1% of a second's rate.
	taken = 0
	for now := t0; now <= t0+10e6; now += 1e4 {
		if g.allow(now) {
			taken++
		}
	}
	if want := floodAdmitRate / 100; taken < want-1 || taken > want+1 {
		t.Errorf("in 10 ms flooded, %d segments taken, want %d", taken, want)
	}
	// Still flooded just before floodHold after the last refusal, with a
	// bucket refilled to the burst; open from then on.
	g.flooded(t0 + 10e6)
	end := t0 + 10e6 + floodHold
	n := 0
	for g.allow(end-1) && n <= 10*floodAdmitBurst {
		n++
	}
	if n != floodAdmitBurst {
		t.Errorf("after a flooded second, %d taken at once, want the burst %d", n, floodAdmitBurst)
	}
	for i := range 10 * floodAdmitBurst {
		if !g.allow(end) {
			t.Fatalf("segment %d refused a floodHold after the last refusal", i)
		}
	}
	if g.active.Load() {
		t.Error("still active a floodHold after the last refusal")
	}
	var none *floodGate
	none.flooded(t0)
	if !none.allow(t0) || !none.open(t0) {
		t.Error("a nil gate refused")
	}
}
