package tickwire_test

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestARPTable: after a ping, each stack's ARP table holds the other,
// resolved, with its MAC.
func TestARPTable(t *testing.T) {
	p := newPair(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.a.Ping(ctx, p.b.Addr()); err != nil {
		t.Fatal(err)
	}
	tab := p.a.ARPTable()
	if len(tab) != 1 || tab[0].Addr != p.b.Addr() || !tab[0].Resolved || !bytes.Equal(tab[0].MAC, p.pb.MAC()) {
		t.Fatalf("A's ARP table %+v; want %v at %v, resolved", tab, p.b.Addr(), p.pb.MAC())
	}
}
