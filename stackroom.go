package tickwire

// inlineStackRoom is the goroutine stack a TCP write over a link that
// delivers inline (link.InlineDeliverer) needs below its caller: netstack's
// send path, then the peer stack's inbound path down to its TCP
// dispatcher. In tcp_connect's loop (DESIGN.md) 16 KiB of room removed
// nearly all of the stack growth; 8 KiB left two thirds of it.
const inlineStackRoom = 16 << 10

// makeStackRoom grows the calling goroutine's stack, if it is smaller, so
// that it has inlineStackRoom bytes free below the caller; the cost is
// zeroing them (about half a microsecond). A goroutine started for one
// connection (a server's per-connection goroutine that closes it, the
// goroutine http.Transport dials from) starts with a few KiB of stack. Left
// alone, its first write over link/pipe grows it from deep inside the
// peer's inbound path, doubling it several times and copying and adjusting
// every frame of that path each time; grown here, the runtime copies the
// caller's few frames once.
//
//go:noinline
func makeStackRoom() {
	var room [inlineStackRoom]byte
	keepRoom(&room)
}

// keepRoom keeps makeStackRoom's frame from being optimised away.
//
//go:noinline
func keepRoom(*[inlineStackRoom]byte) {}
