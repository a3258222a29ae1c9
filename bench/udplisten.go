package main

import (
	"fmt"
	"net"
	"time"
)

// udp_listen_64k and udp_listen_64k_mem: opening a UDP listener on every
// port of a stack (the seed's engine listens on 64K ports).

const (
	allUDPPorts     = 65535 // every port but 0
	kernelListeners = 4096  // the kernel baseline's sockets (file descriptors)
	fewUDPListeners = 1000  // udp_listen_64k_mem's baseline
	firstListenPort = 1     // the first port opened
)

// openListeners opens n ListenUDP sockets, on ports 1 to n, on a fresh
// stack, and reports the time it took and the heap growth per socket
// (after a GC before and after).
func openListeners(n int) (time.Duration, float64, error) {
	sp, err := newStackPair(0, 0, false)
	if err != nil {
		return 0, 0, err
	}
	defer sp.Close()
	heap0 := heapAlloc()
	start := time.Now()
	for i := range n {
		if _, err := sp.server.ListenUDP(uint16(firstListenPort + i)); err != nil {
			return 0, 0, fmt.Errorf("listener %d of %d: %w", i+1, n, err)
		}
	}
	elapsed := time.Since(start)
	perSocket := float64(int64(heapAlloc())-int64(heap0)) / float64(n)
	return elapsed, perSocket, nil
}

// listenerMemory keeps the per-listener heap that udp_listen_64k measured
// while opening its listeners, by count, for udp_listen_64k_mem.
var listenerMemory = map[int][]float64{}

func setupUDPListen(p params) (*pair, error) {
	n := p.udpPorts
	return &pair{
		tickwire: func() (sample, error) {
			d, perSocket, err := openListeners(n)
			if err != nil {
				return sample{}, err
			}
			listenerMemory[n] = append(listenerMemory[n], perSocket)
			return sample{value: d.Seconds() * allUDPPorts / float64(n), ops: int64(n)}, nil
		},
		baseline: func() (sample, error) { return kernelListen(min(n, kernelListeners)) },
		close:    func() {},
	}, nil
}

// kernelListen opens n kernel UDP sockets bound to 127.0.0.1 (ephemeral
// ports: a fixed range could collide with other programs) and reports the
// time, scaled to allUDPPorts sockets.
func kernelListen(n int) (sample, error) {
	conns := make([]*net.UDPConn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for range n {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return sample{}, err
		}
		conns = append(conns, c)
	}
	return sample{value: time.Since(start).Seconds() * allUDPPorts / float64(n)}, nil
}

func setupUDPListenMemory(p params) (*pair, error) {
	side := func(n int) func() (sample, error) {
		round := 0
		return func() (sample, error) {
			round++
			if m := listenerMemory[n]; round <= len(m) {
				return sample{value: m[round-1]}, nil
			}
			_, perSocket, err := openListeners(n)
			if err != nil {
				return sample{}, err
			}
			return sample{value: perSocket}, nil
		}
	}
	return &pair{tickwire: side(p.udpPorts), baseline: side(min(p.udpPorts, fewUDPListeners)), close: func() {}}, nil
}
