//go:build !amd64 || purego

package fast

// setHandlers does nothing: only amd64 has the assembly loop.
func setHandlers([]fop) {}

// loop runs fastLoop on p's fast tape.
func (d *Decoder) loop(b []byte, st *fastState, p *program, m *Message) int {
	return d.fastLoop(b, st, p.fast, m)
}
