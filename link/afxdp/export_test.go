//go:build linux && (amd64 || arm64)

package afxdp

import "golang.org/x/sys/unix"

// AttachNetlink attaches program fd progFD to an interface in generic mode
// through netlink, as `ip link set dev X xdpgeneric ...` does: the way
// that outlives the process, for the tests of foreign and stale programs.
func AttachNetlink(ifindex int, progFD int) error {
	return setXDPNetlink(ifindex, int32(progFD), unix.XDP_FLAGS_SKB_MODE)
}

// ProgramPrefix is the name prefix that marks a tickwire program.
const ProgramPrefix = programPrefix
