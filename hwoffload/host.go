package hwoffload

// The host path (REGISTERS.md, "Host path"): the general TOE and UDP driven
// through a command ring, answered on result ring 3 (RingHost). The
// registers below live in the window from 0x2000; the command ring, the
// session buffers and the UDP areas live in the region, where the
// *_BASE registers say (byte offsets in the twin's region).
const (
	RegCmdBase      = 0x2000 // RO 64-bit: byte offset of command slot 0
	RegCmdLog2Slots = 0x2008 // RO: the command ring has 2^CMD_LOG2_SLOTS slots
	RegCmdSlotBytes = 0x200C // RO: CmdSlotBytes
	RegCmdProd      = 0x2010 // RW: commands the host has written, mod 2^32
	RegCmdCons      = 0x2014 // RO: commands the engine has taken, mod 2^32

	RegSessBase     = 0x2020 // RO 64-bit: byte offset of session 0's RX buffer
	RegSessions     = 0x2028 // RO: Sessions
	RegSessBufBytes = 0x202C // RO: SessBufBytes, each of a session's RX and TX buffers

	RegUDPRxBase    = 0x2030 // RO 64-bit: byte offset of the UDP receive area
	RegUDPRxBytes   = 0x2038 // RO: UDPAreaBytes
	RegUDPRxProd    = 0x203C // RO: bytes written into the UDP receive area, mod 2^32
	RegUDPRxCons    = 0x2040 // RW: bytes of it the host has consumed, mod 2^32
	RegUDPTxBase    = 0x2048 // RO 64-bit: byte offset of the UDP send area
	RegUDPTxBytes   = 0x2050 // RO: UDPAreaBytes
	RegUDPRxDropped = 0x2058 // RO 64-bit: datagrams dropped, the receive area full
	RegHostRefused  = 0x2060 // RO 64-bit: connections refused on a LISTEN port, no session free
	RegHostHeld     = 0x2068 // RO 64-bit: ring 3 records held back for a full ring 3, written later

	// RegSess0 is session 0's registers; session s's are at RegSess0 +
	// SessStride*s, laid out as the Sess* offsets say.
	RegSess0   = 0x2100
	SessStride = 0x20

	// RegARP0 is the ARP table: MaxARPEntries entries of ARPStride bytes,
	// laid out as the ARP* offsets say; ARP_COUNT entries are valid, the
	// first ones.
	RegARP0   = 0x3000
	ARPStride = 0x10

	// RegUDPPorts and RegListenPorts are bitmaps of 65536 bits (8 KiB):
	// bit p (word p/32, bit p%32) is set while UDP port p is bound
	// (UDP_BIND), respectively TCP port p is listening (LISTEN).
	RegUDPPorts    = 0x4000
	RegListenPorts = 0x6000
	PortBitmapSize = 0x2000
)

// Offsets of a session's registers from SessReg(s, 0).
const (
	SessState      = 0x00 // RO: SessFree..SessClosing
	SessLocalPort  = 0x04 // RO
	SessRemoteIP   = 0x08 // RO
	SessRemotePort = 0x0C // RO
	SessRxProd     = 0x10 // RO: bytes written into the RX buffer, mod 2^32
	SessRxCons     = 0x14 // RW: bytes of it the host has consumed, mod 2^32
	SessTxCons     = 0x18 // RO: bytes of the TX buffer the engine has sent on, mod 2^32
	SessTxProd     = 0x1C // RO: bytes SEND commands have handed over, mod 2^32
)

// Offsets of an ARP table entry from ARPReg(i, 0).
const (
	ARPAddr  = 0x0 // IPv4
	ARPMACHi = 0x4 // o0<<8|o1
	ARPMACLo = 0x8 // o2<<24|o3<<16|o4<<8|o5
	ARPFlags = 0xC // ARPResolved
)

// SessReg returns the window offset of session s's register reg.
func SessReg(s, reg int) int { return RegSess0 + SessStride*s + reg }

// ARPReg returns the window offset of ARP table entry i's field reg.
func ARPReg(i, reg int) int { return RegARP0 + ARPStride*i + reg }

// Host-path geometry and values.
const (
	CmdSlotBytes = 64
	CmdLog2Slots = 8 // the twin's command ring: 256 slots
	Sessions     = 64
	SessBufBytes = 32 << 10
	UDPAreaBytes = 64 << 10
	MaxDatagram  = 1472 // the largest UDP payload, Ethernet MTU 1500
	ARPResolved  = 1 << 0
)

// Session states (a session's STATE register).
const (
	SessFree        = 0 // no connection
	SessOpening     = 1 // OPEN issued, handshake under way
	SessEstablished = 2
	SessPeerClosed  = 3 // the peer sent FIN or reset: no more bytes will come
	SessClosing     = 4 // CLOSE issued; free once the engine let go of it
)

// Command opcodes (a command slot's op).
const (
	OpListen    = 1 // port: start accepting TCP connections on it
	OpOpen      = 2 // session, ip, port: connect (session chosen by the host, free)
	OpClose     = 3 // session: close the connection and free the session
	OpSend      = 4 // session, length: send length more bytes of the TX buffer
	OpUDPBind   = 5 // port: receive UDP datagrams to it, send from it
	OpUDPSend   = 6 // port (source, bound), ip, dst port, offset, length: send a datagram from the UDP send area
	OpUnlisten  = 7 // port: stop accepting on it
	OpUDPUnbind = 8 // port
)

// Offsets in a command slot. Unused fields are zero.
const (
	CmdOp      = 0  // u16
	CmdSession = 2  // u16
	CmdTag     = 4  // u32: the host's, echoed in the completion
	CmdIP      = 8  // u32: OPEN's remote, UDP_SEND's destination IPv4
	CmdPort    = 12 // u16: LISTEN, UNLISTEN, UDP_BIND, UDP_UNBIND's port, OPEN's remote port, UDP_SEND's source port
	CmdDstPort = 14 // u16: UDP_SEND's destination port
	CmdLength  = 16 // u32: SEND, UDP_SEND
	CmdOffset  = 20 // u32: UDP_SEND: offset of the datagram in the UDP send area
)

// Host-path record kinds, on ring 3.
const (
	KindCompletion = 16 // a command is done
	KindAccepted   = 17 // a connection arrived on a LISTEN port
	KindRecv       = 18 // bytes arrived in a session's RX buffer
	KindPeerClosed = 19 // the peer closed (FIN) or reset the connection
	KindUDPRecv    = 20 // a datagram arrived in the UDP receive area
)

// Offsets in ring 3 records, after the header (whose flow field is the
// session, or 0xFFFFFFFF).
const (
	ComplTag    = 32 // u32
	ComplOp     = 36 // u16
	ComplStatus = 38 // u16: HostStatus
	ComplPort   = 40 // u16: the local port (LISTEN, OPEN, UDP_BIND)
	ComplLength = 44 // u32: SEND and UDP_SEND: bytes handed to the network

	AcceptLocalPort  = 32 // u16
	AcceptRemotePort = 34 // u16
	AcceptRemoteIP   = 36 // u32

	RecvProd = 32 // u32: the session's RX_PROD after these bytes
	RecvLen  = 36 // u32

	PeerClosedReset = 32 // u8: 0 FIN, 1 reset or error

	UDPRecvLocalPort  = 32 // u16
	UDPRecvRemotePort = 34 // u16
	UDPRecvRemoteIP   = 36 // u32
	UDPRecvPos        = 40 // u32: UDP_RX_PROD position of the datagram's first byte
	UDPRecvLen        = 44 // u32
)

// HostStatus is a completion's status.
type HostStatus uint16

// Completion statuses.
const (
	StatusOK         HostStatus = 0
	StatusBadCommand HostStatus = 1 // refused: unknown op, session or port out of range, length over the buffer (ERROR BAD_COMMAND is set too)
	StatusNoIPAddr   HostStatus = 2 // IP_ADDR is 0 (ERROR NO_IP_ADDR is set too)
	StatusInUse      HostStatus = 3 // the port is bound or listening already, the session not free
	StatusRefused    HostStatus = 4 // the peer refused or did not answer (OPEN)
	StatusNotOpen    HostStatus = 5 // the session, port or listener is not open
	StatusNetwork    HostStatus = 6 // the stack failed the operation (a send error, no route)
	StatusNoHostPath HostStatus = 7 // the engine has no network port (a twin without a link)
)

// HostStatuses lists the statuses with their REGISTERS.md names.
var HostStatuses = []struct {
	Status HostStatus
	Name   string
}{
	{StatusOK, "OK"}, {StatusBadCommand, "BAD_COMMAND"}, {StatusNoIPAddr, "NO_IP_ADDR"},
	{StatusInUse, "IN_USE"}, {StatusRefused, "REFUSED"}, {StatusNotOpen, "NOT_OPEN"},
	{StatusNetwork, "NETWORK"}, {StatusNoHostPath, "NO_HOST_PATH"},
}

// HostRegisters lists the host path's window registers, by offset (the
// session registers are in SessionRegisters, the ARP table in ARPFields).
var HostRegisters = []Register{
	{"CMD_BASE", RegCmdBase, 64, RO},
	{"CMD_LOG2_SLOTS", RegCmdLog2Slots, 32, RO},
	{"CMD_SLOT_BYTES", RegCmdSlotBytes, 32, RO},
	{"CMD_PROD", RegCmdProd, 32, RW},
	{"CMD_CONS", RegCmdCons, 32, RO},
	{"SESS_BASE", RegSessBase, 64, RO},
	{"SESSIONS", RegSessions, 32, RO},
	{"SESS_BUF_BYTES", RegSessBufBytes, 32, RO},
	{"UDP_RX_BASE", RegUDPRxBase, 64, RO},
	{"UDP_RX_BYTES", RegUDPRxBytes, 32, RO},
	{"UDP_RX_PROD", RegUDPRxProd, 32, RO},
	{"UDP_RX_CONS", RegUDPRxCons, 32, RW},
	{"UDP_TX_BASE", RegUDPTxBase, 64, RO},
	{"UDP_TX_BYTES", RegUDPTxBytes, 32, RO},
	{"UDP_RX_DROPPED", RegUDPRxDropped, 64, RO},
	{"HOST_REFUSED", RegHostRefused, 64, RO},
	{"HOST_HELD", RegHostHeld, 64, RO},
}

// SessionRegisters lists a session's registers, offsets from SessReg(s, 0).
var SessionRegisters = []Register{
	{"STATE", SessState, 32, RO},
	{"LOCAL_PORT", SessLocalPort, 32, RO},
	{"REMOTE_IP", SessRemoteIP, 32, RO},
	{"REMOTE_PORT", SessRemotePort, 32, RO},
	{"RX_PROD", SessRxProd, 32, RO},
	{"RX_CONS", SessRxCons, 32, RW},
	{"TX_CONS", SessTxCons, 32, RO},
	{"TX_PROD", SessTxProd, 32, RO},
}

// Field is a field of a command slot, an ARP entry or a ring 3 record.
type Field struct {
	Kind   int // the record kind (ring 3 records), else 0
	Offset int
	Name   string // as in REGISTERS.md
	Type   string // u8, u16, u32
}

// CommandFields lists a command slot's fields.
var CommandFields = []Field{
	{0, CmdOp, "op", "u16"}, {0, CmdSession, "session", "u16"}, {0, CmdTag, "tag", "u32"},
	{0, CmdIP, "ip", "u32"}, {0, CmdPort, "port", "u16"}, {0, CmdDstPort, "dst_port", "u16"},
	{0, CmdLength, "length", "u32"}, {0, CmdOffset, "offset", "u32"},
}

// ARPFields lists an ARP table entry's fields.
var ARPFields = []Field{
	{0, ARPAddr, "ip", "u32"}, {0, ARPMACHi, "mac_hi", "u32"}, {0, ARPMACLo, "mac_lo", "u32"}, {0, ARPFlags, "flags", "u32"},
}

// Ops lists the command opcodes with their REGISTERS.md names.
var Ops = []struct {
	Op   int
	Name string
}{
	{OpListen, "LISTEN"}, {OpOpen, "OPEN"}, {OpClose, "CLOSE"}, {OpSend, "SEND"},
	{OpUDPBind, "UDP_BIND"}, {OpUDPSend, "UDP_SEND"}, {OpUnlisten, "UNLISTEN"}, {OpUDPUnbind, "UDP_UNBIND"},
}

// HostRecordFields lists the fields of ring 3's records, by kind.
var HostRecordFields = []Field{
	{KindCompletion, ComplTag, "tag", "u32"}, {KindCompletion, ComplOp, "op", "u16"},
	{KindCompletion, ComplStatus, "status", "u16"}, {KindCompletion, ComplPort, "port", "u16"},
	{KindCompletion, ComplLength, "length", "u32"},
	{KindAccepted, AcceptLocalPort, "local port", "u16"}, {KindAccepted, AcceptRemotePort, "remote port", "u16"},
	{KindAccepted, AcceptRemoteIP, "remote IPv4", "u32"},
	{KindRecv, RecvProd, "rx_prod", "u32"}, {KindRecv, RecvLen, "length", "u32"},
	{KindPeerClosed, PeerClosedReset, "reset", "u8"},
	{KindUDPRecv, UDPRecvLocalPort, "local port", "u16"}, {KindUDPRecv, UDPRecvRemotePort, "remote port", "u16"},
	{KindUDPRecv, UDPRecvRemoteIP, "remote IPv4", "u32"}, {KindUDPRecv, UDPRecvPos, "pos", "u32"},
	{KindUDPRecv, UDPRecvLen, "length", "u32"},
}

// CmdSlot is one command slot, CmdSlotBytes long.
type CmdSlot []byte

// Op, Session, Tag, IP, Port, DstPort, Length and Offset read a command's
// fields.
func (c CmdSlot) Op() uint16      { return le.Uint16(c[CmdOp:]) }
func (c CmdSlot) Session() uint16 { return le.Uint16(c[CmdSession:]) }
func (c CmdSlot) Tag() uint32     { return le.Uint32(c[CmdTag:]) }
func (c CmdSlot) IP() uint32      { return le.Uint32(c[CmdIP:]) }
func (c CmdSlot) Port() uint16    { return le.Uint16(c[CmdPort:]) }
func (c CmdSlot) DstPort() uint16 { return le.Uint16(c[CmdDstPort:]) }
func (c CmdSlot) Length() uint32  { return le.Uint32(c[CmdLength:]) }
func (c CmdSlot) Offset() uint32  { return le.Uint32(c[CmdOffset:]) }

// Command is a command's fields, for CmdSlot.Put.
type Command struct {
	Op, Session    uint16
	Tag, IP        uint32
	Port, DstPort  uint16
	Length, Offset uint32
}

// Put writes cmd into the slot, zeroing the rest.
func (c CmdSlot) Put(cmd Command) {
	clear(c[:CmdSlotBytes])
	le.PutUint16(c[CmdOp:], cmd.Op)
	le.PutUint16(c[CmdSession:], cmd.Session)
	le.PutUint32(c[CmdTag:], cmd.Tag)
	le.PutUint32(c[CmdIP:], cmd.IP)
	le.PutUint16(c[CmdPort:], cmd.Port)
	le.PutUint16(c[CmdDstPort:], cmd.DstPort)
	le.PutUint32(c[CmdLength:], cmd.Length)
	le.PutUint32(c[CmdOffset:], cmd.Offset)
}

// Get reads the slot's fields.
func (c CmdSlot) Get() Command {
	return Command{Op: c.Op(), Session: c.Session(), Tag: c.Tag(), IP: c.IP(), Port: c.Port(),
		DstPort: c.DstPort(), Length: c.Length(), Offset: c.Offset()}
}

// Completion reads a KindCompletion record: the command's tag and op, its
// status, the local port and the length handed to the network.
func (s Slot) Completion() (tag uint32, op uint16, st HostStatus, port uint16, length uint32) {
	return le.Uint32(s[ComplTag:]), le.Uint16(s[ComplOp:]), HostStatus(le.Uint16(s[ComplStatus:])),
		le.Uint16(s[ComplPort:]), le.Uint32(s[ComplLength:])
}

// PutCompletion writes a KindCompletion body.
func (s Slot) PutCompletion(tag uint32, op uint16, st HostStatus, port uint16, length uint32) {
	le.PutUint32(s[ComplTag:], tag)
	le.PutUint16(s[ComplOp:], op)
	le.PutUint16(s[ComplStatus:], uint16(st))
	le.PutUint16(s[ComplPort:], port)
	le.PutUint32(s[ComplLength:], length)
}

// Accepted reads a KindAccepted record.
func (s Slot) Accepted() (localPort, remotePort uint16, remoteIP uint32) {
	return le.Uint16(s[AcceptLocalPort:]), le.Uint16(s[AcceptRemotePort:]), le.Uint32(s[AcceptRemoteIP:])
}

// PutAccepted writes a KindAccepted body.
func (s Slot) PutAccepted(localPort, remotePort uint16, remoteIP uint32) {
	le.PutUint16(s[AcceptLocalPort:], localPort)
	le.PutUint16(s[AcceptRemotePort:], remotePort)
	le.PutUint32(s[AcceptRemoteIP:], remoteIP)
}

// Recv reads a KindRecv record.
func (s Slot) Recv() (rxProd, length uint32) {
	return le.Uint32(s[RecvProd:]), le.Uint32(s[RecvLen:])
}

// PutRecv writes a KindRecv body.
func (s Slot) PutRecv(rxProd, length uint32) {
	le.PutUint32(s[RecvProd:], rxProd)
	le.PutUint32(s[RecvLen:], length)
}

// UDPRecv reads a KindUDPRecv record.
func (s Slot) UDPRecv() (localPort, remotePort uint16, remoteIP, pos, length uint32) {
	return le.Uint16(s[UDPRecvLocalPort:]), le.Uint16(s[UDPRecvRemotePort:]), le.Uint32(s[UDPRecvRemoteIP:]),
		le.Uint32(s[UDPRecvPos:]), le.Uint32(s[UDPRecvLen:])
}

// PutUDPRecv writes a KindUDPRecv body.
func (s Slot) PutUDPRecv(localPort, remotePort uint16, remoteIP, pos, length uint32) {
	le.PutUint16(s[UDPRecvLocalPort:], localPort)
	le.PutUint16(s[UDPRecvRemotePort:], remotePort)
	le.PutUint32(s[UDPRecvRemoteIP:], remoteIP)
	le.PutUint32(s[UDPRecvPos:], pos)
	le.PutUint32(s[UDPRecvLen:], length)
}
