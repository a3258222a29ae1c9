//go:build !amd64

package fast

// setHandlers does nothing: only amd64 has the assembly loop.
func setHandlers([]fop) {}

// loop runs fastLoop.
func (d *Decoder) loop(b []byte, st *fastState, ft []fop, m *Message) int {
	return d.fastLoop(b, st, ft, m)
}
