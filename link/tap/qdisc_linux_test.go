//go:build linux

package tap

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestNetlinkAck(t *testing.T) {
	ack := func(errno int32) []byte {
		b := make([]byte, 36)
		binary.NativeEndian.PutUint16(b[4:], 2) // NLMSG_ERROR
		binary.NativeEndian.PutUint32(b[16:], uint32(errno))
		return b
	}
	if err := netlinkAck(ack(0)); err != nil {
		t.Errorf("success: %v", err)
	}
	if err := netlinkAck(ack(-1)); !errors.Is(err, unix.EPERM) {
		t.Errorf("EPERM answer: %v", err)
	}
	if err := netlinkAck(ack(0)[:10]); err == nil {
		t.Error("a short answer was taken for success")
	}
	if req := noQueueRequest(7); len(req)%4 != 0 || int(binary.NativeEndian.Uint32(req)) != len(req) {
		t.Errorf("request of %d bytes says %d", len(req), binary.NativeEndian.Uint32(req))
	}
}
