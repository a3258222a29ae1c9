package tickwire_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// TestConfigErrors checks that each invalid field yields a *ConfigError
// naming that field.
func TestConfigErrors(t *testing.T) {
	pa, _ := pipe.New(pipe.Options{})
	valid := func() tickwire.Config {
		return tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: addrA}
	}
	for _, tc := range []struct {
		field string
		edit  func(*tickwire.Config)
	}{
		{"Link", func(c *tickwire.Config) { c.Link = nil }},
		{"MAC", func(c *tickwire.Config) { c.MAC = net.HardwareAddr{1, 2, 3} }},
		{"MAC", func(c *tickwire.Config) { c.MAC = net.HardwareAddr{1, 0, 0x5e, 0, 0, 1} }}, // multicast
		{"Addr", func(c *tickwire.Config) { c.Addr = netip.Prefix{} }},
		{"Addr", func(c *tickwire.Config) { c.Addr = netip.MustParsePrefix("fd00::1/64") }},
		{"Addr", func(c *tickwire.Config) { c.Addr = netip.MustParsePrefix("224.0.0.1/24") }},
		{"Gateway", func(c *tickwire.Config) { c.Gateway = netip.MustParseAddr("192.168.1.1") }},
		{"Gateway", func(c *tickwire.Config) { c.Gateway = addrA.Addr() }},
		{"MTU", func(c *tickwire.Config) { c.MTU = 100 }},
		{"MTU", func(c *tickwire.Config) { c.MTU = 9000 }}, // above the pipe's 1500
		{"MTU", func(c *tickwire.Config) { c.MTU = -1 }},
		{"MSS", func(c *tickwire.Config) { c.MSS = 1461 }},
		{"MSS", func(c *tickwire.Config) { c.MSS = 100 }},
		{"MSS", func(c *tickwire.Config) { c.MTU, c.MSS = 1000, 1408 }},
		{"SendBuffer", func(c *tickwire.Config) { c.SendBuffer = 100 }},
		{"SendBuffer", func(c *tickwire.Config) { c.SendBuffer = 1 << 30 }},
		{"ReceiveBuffer", func(c *tickwire.Config) { c.ReceiveBuffer = -5 }},
		{"ReceiveBufferMax", func(c *tickwire.Config) { c.ReceiveBufferMax = 4<<20 + 1 }},
		{"SendBufferMax", func(c *tickwire.Config) { c.SendBufferMax = 4<<20 + 1 }},
		{"Congestion", func(c *tickwire.Config) { c.Congestion = "bbr" }},
		{"MaxConnections", func(c *tickwire.Config) { c.MaxConnections = -1 }},
		{"MaxConnections", func(c *tickwire.Config) { c.MaxConnections = tickwire.MaxConnectionsLimit + 1 }},
		{"MaxConnectionsPerSource", func(c *tickwire.Config) { c.MaxConnectionsPerSource = -1 }},
		{"MaxConnectionsPerSource", func(c *tickwire.Config) { c.MaxConnectionsPerSource = 65 }}, // above the default 64
		{"MaxConnectionsPerSource", func(c *tickwire.Config) { c.MaxConnections, c.MaxConnectionsPerSource = 8, 9 }},
		{"KeepaliveIdle", func(c *tickwire.Config) { c.KeepaliveIdle = time.Millisecond }},
		{"KeepaliveIdle", func(c *tickwire.Config) { c.KeepaliveIdle = 32768 * time.Second }},
		{"KeepaliveInterval", func(c *tickwire.Config) { c.KeepaliveInterval = -time.Second }},
		{"KeepaliveInterval", func(c *tickwire.Config) { c.KeepaliveInterval = time.Millisecond }},
		{"KeepaliveInterval", func(c *tickwire.Config) { c.KeepaliveInterval = 32768 * time.Second }},
		{"KeepaliveCount", func(c *tickwire.Config) { c.KeepaliveCount = -1 }},
		{"KeepaliveCount", func(c *tickwire.Config) { c.KeepaliveCount = 128 }},
		{"IdleTimeout", func(c *tickwire.Config) { c.IdleTimeout = -time.Second }},
		{"IdleTimeout", func(c *tickwire.Config) { c.IdleTimeout = time.Millisecond }},
		{"IdleTimeout", func(c *tickwire.Config) { c.IdleTimeout = 25 * time.Hour }},
		{"TimeWait", func(c *tickwire.Config) { c.TimeWait = -time.Second }},
		{"TimeWait", func(c *tickwire.Config) { c.TimeWait = time.Millisecond }},
		{"TimeWait", func(c *tickwire.Config) { c.TimeWait = 5 * time.Minute }},
		{"MaxTimeWait", func(c *tickwire.Config) { c.MaxTimeWait = -1 }},
		{"MaxTimeWait", func(c *tickwire.Config) { c.MaxTimeWait = tickwire.MaxTimeWaitLimit + 1 }},
		{"ARPEntries", func(c *tickwire.Config) { c.ARPEntries = 513 }},
		{"ARPEntries", func(c *tickwire.Config) { c.ARPEntries = -1 }},
		{"ARPTimeout", func(c *tickwire.Config) { c.ARPTimeout = time.Microsecond }},
		{"ARPTimeout", func(c *tickwire.Config) { c.ARPTimeout = time.Hour }},
		{"UDPReceiveQueue", func(c *tickwire.Config) { c.UDPReceiveQueue = -1 }},
		{"UDPReceiveQueue", func(c *tickwire.Config) { c.UDPReceiveQueue = tickwire.MaxUDPReceiveQueue + 1 }},
		{"UDPReceiveBuffer", func(c *tickwire.Config) { c.UDPReceiveBuffer = tickwire.MinUDPReceiveBuffer - 1 }},
		{"UDPReceiveBuffer", func(c *tickwire.Config) { c.UDPReceiveBuffer = tickwire.MaxUDPReceiveBuffer + 1 }},
		{"StaticARP[10.9.9.9]", func(c *tickwire.Config) {
			c.StaticARP = map[netip.Addr]net.HardwareAddr{netip.MustParseAddr("10.9.9.9"): {2, 0, 0, 0, 0, 1}}
		}},
		{"StaticARP[10.0.0.9]", func(c *tickwire.Config) {
			c.StaticARP = map[netip.Addr]net.HardwareAddr{netip.MustParseAddr("10.0.0.9"): {2, 0}}
		}},
	} {
		cfg := valid()
		tc.edit(&cfg)
		s, err := tickwire.New(cfg)
		if err == nil {
			s.Close()
			t.Errorf("%s: New accepted an invalid config", tc.field)
			continue
		}
		var ce *tickwire.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: err = %v, want a *ConfigError for field %s", tc.field, err, tc.field)
			continue
		}
		if !strings.HasPrefix(err.Error(), "tickwire: Config."+tc.field+": ") {
			t.Errorf("message %q lacks the prefix and field", err)
		}
	}
}

// TestConfigDefaults checks the defaults New applies.
func TestConfigDefaults(t *testing.T) {
	pa, _ := pipe.New(pipe.Options{})
	s, err := tickwire.New(tickwire.Config{Link: pa, Addr: addrA}) // MAC from the link
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.Config()
	want := tickwire.Config{
		Link: pa, MAC: pa.MAC(), Addr: addrA, MTU: 1500, MSS: 1408, SendBuffer: 32 << 10, ReceiveBuffer: 32 << 10,
		Congestion: "reno", MaxConnections: 64, ARPEntries: 128, ARPTimeout: 500 * time.Millisecond,
	}
	if got.MTU != want.MTU || got.MSS != want.MSS || got.SendBuffer != want.SendBuffer || got.ReceiveBuffer != want.ReceiveBuffer ||
		got.Congestion != want.Congestion || got.MaxConnections != want.MaxConnections || got.ARPEntries != want.ARPEntries ||
		got.ARPTimeout != want.ARPTimeout || got.MAC.String() != want.MAC.String() || got.DisableNoDelay || got.SACK {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if got.MaxConnectionsPerSource != 32 || got.KeepaliveIdle != 30*time.Second || got.KeepaliveInterval != 5*time.Second ||
		got.KeepaliveCount != 5 || got.IdleTimeout != 0 || got.TimeWait != time.Minute || got.MaxTimeWait != 65536 {
		t.Errorf("connection defaults: MaxConnectionsPerSource %d, keepalive %v/%v/%d, IdleTimeout %v, TimeWait %v, MaxTimeWait %d; want 32, 30s/5s/5, 0, 1m0s, 65536",
			got.MaxConnectionsPerSource, got.KeepaliveIdle, got.KeepaliveInterval, got.KeepaliveCount, got.IdleTimeout, got.TimeWait, got.MaxTimeWait)
	}
}

// TestConfigBufferMax checks the bounds of receive- and send-buffer
// auto-tuning New settles on: the default, at least the buffer, and growth
// off (the bound is the buffer) for a negative value or one below the
// buffer. The send defaults are the receive ones (32 KiB, 1 MiB).
func TestConfigBufferMax(t *testing.T) {
	if tickwire.DefaultSendBuffer != tickwire.DefaultReceiveBuffer || tickwire.DefaultSendBufferMax != tickwire.DefaultReceiveBufferMax {
		t.Fatal("the send and receive defaults differ: give the send cases their own wants")
	}
	for _, tc := range []struct{ buf, max, want int }{
		{0, 0, tickwire.DefaultReceiveBufferMax},
		{2 << 20, 0, 2 << 20},
		{0, 256 << 10, 256 << 10},
		{0, 4 << 20, 4 << 20},
		{0, -1, tickwire.DefaultReceiveBuffer},
		{64 << 10, 16 << 10, 64 << 10},
	} {
		for _, send := range []bool{false, true} {
			cfg := tickwire.Config{Addr: addrA, ReceiveBuffer: tc.buf, ReceiveBufferMax: tc.max}
			if send {
				cfg = tickwire.Config{Addr: addrA, SendBuffer: tc.buf, SendBufferMax: tc.max}
			}
			cfg.Link, _ = pipe.New(pipe.Options{})
			s, err := tickwire.New(cfg)
			if err != nil {
				t.Fatalf("send %v, buffer %d, bound %d: %v", send, tc.buf, tc.max, err)
			}
			got := s.Config().ReceiveBufferMax
			if send {
				got = s.Config().SendBufferMax
			}
			if got != tc.want {
				t.Errorf("send %v, buffer %d, bound %d: settled on %d, want %d", send, tc.buf, tc.max, got, tc.want)
			}
			s.Close()
		}
	}
}

// TestConfigDefaultsFindDeadPeerInAMinute checks the arithmetic behind the
// keepalive defaults: a peer that vanished is found, and its connection
// reset, within 60 s of its last answer (issue 12's goal).
func TestConfigDefaultsFindDeadPeerInAMinute(t *testing.T) {
	found := tickwire.DefaultKeepaliveIdle + tickwire.DefaultKeepaliveCount*tickwire.DefaultKeepaliveInterval
	if found > time.Minute {
		t.Errorf("keepalive defaults find a dead peer after %v, want at most 1m", found)
	}
}

// TestConfigPerSourceDefault checks MaxConnectionsPerSource's default,
// half of MaxConnections and at least 1, and that the limit can be turned
// off by setting it to MaxConnections.
func TestConfigPerSourceDefault(t *testing.T) {
	for _, tc := range []struct{ max, perSource, want int }{
		{0, 0, 32}, {1, 0, 1}, {3, 0, 1}, {10, 0, 5}, {10, 10, 10}, {10, 1, 1},
	} {
		pa, _ := pipe.New(pipe.Options{})
		s, err := tickwire.New(tickwire.Config{Link: pa, Addr: addrA, MaxConnections: tc.max, MaxConnectionsPerSource: tc.perSource})
		if err != nil {
			t.Fatalf("MaxConnections %d, MaxConnectionsPerSource %d: %v", tc.max, tc.perSource, err)
		}
		if got := s.Config().MaxConnectionsPerSource; got != tc.want {
			t.Errorf("MaxConnections %d, MaxConnectionsPerSource %d: got %d, want %d", tc.max, tc.perSource, got, tc.want)
		}
		s.Close()
	}
}

// TestCubic runs a transfer with CUBIC congestion control and Nagle on.
func TestCubic(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		c.Congestion = "cubic"
		c.DisableNoDelay = true
	})
	p.serveEcho(t)
	c := p.dialEcho(t)
	if err := exchange(c, randomBytes(1<<20, 9), randomBytes(1<<20, 9)); err != nil {
		t.Fatal(err)
	}
}
