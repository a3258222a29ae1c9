package hwoffload

import "strconv"

// ErrorCode is a value of the ERROR register: why the engine refused a
// register write (the write is then treated as never written: the engine
// puts the register back) or which fault it hit. RESET clears it.
type ErrorCode uint32

// Error codes; REGISTERS.md lists them too.
const (
	CodeNone ErrorCode = iota
	// CodeConsAhead: a ring's CONS was written ahead of its PROD, or
	// behind the CONS last accepted.
	CodeConsAhead
	// CodeControlBits: CONTROL was written with an undefined bit set.
	CodeControlBits
	// CodeReadOnly: a read-only register was written.
	CodeReadOnly
	// CodeWhileRunning: a configuration register (IP_ADDR to FAST_CTRL)
	// was written while STATUS.RUNNING was set.
	CodeWhileRunning
	// CodeBadValue: a configuration value out of range: MAC_HI above
	// 0xFFFF, an undefined MIRROR_CTRL or FAST_CTRL bit, a
	// MIRROR_SERVER_PORT above 65535, a NETMASK whose ones are not
	// contiguous.
	CodeBadValue
	// CodeNoIPAddr: a host-path command needs an address while IP_ADDR
	// is 0.
	CodeNoIPAddr
	// CodeInput: engine fault: reading the input failed; the input stops
	// and LINK_UP clears.
	CodeInput
	// CodeRingBase: a ring's BASE is not RingAlign-aligned or rings
	// overlap (reserved for the card, where BASE is written by the host).
	CodeRingBase
	// CodeBadCommand: a command the engine cannot accept (an unknown op,
	// a session or offset out of range, a SEND longer than the TX
	// buffer's free bytes, a UDP_SEND over MaxDatagram), or CMD_PROD
	// written more than the ring's slots ahead of CMD_CONS or behind the
	// value last accepted. The command is skipped (its completion says
	// BAD_COMMAND); a bad CMD_PROD is put back.
	CodeBadCommand
)

// ErrorCodes lists the codes with their REGISTERS.md names, by value.
var ErrorCodes = []struct {
	Code ErrorCode
	Name string
}{
	{CodeNone, "NONE"},
	{CodeConsAhead, "CONS_AHEAD"},
	{CodeControlBits, "CONTROL_BITS"},
	{CodeReadOnly, "READ_ONLY"},
	{CodeWhileRunning, "WHILE_RUNNING"},
	{CodeBadValue, "BAD_VALUE"},
	{CodeNoIPAddr, "NO_IP_ADDR"},
	{CodeInput, "INPUT"},
	{CodeRingBase, "RING_BASE"},
	{CodeBadCommand, "BAD_COMMAND"},
}

// String returns the code's REGISTERS.md name, or its number.
func (c ErrorCode) String() string {
	if int(c) < len(ErrorCodes) {
		return ErrorCodes[c].Name
	}
	return "ERROR_" + strconv.FormatUint(uint64(c), 10)
}
