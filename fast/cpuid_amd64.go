//go:build !purego

package fast

import "encoding/binary"

// cpuid runs the CPUID instruction.
func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// cpuVendorFamily returns the CPU's vendor string and its family (base
// family plus extended family, as vendors number their generations).
func cpuVendorFamily() (vendor string, family uint32) {
	_, b, c, d := cpuid(0, 0)
	var v [12]byte
	binary.LittleEndian.PutUint32(v[0:], b)
	binary.LittleEndian.PutUint32(v[4:], d)
	binary.LittleEndian.PutUint32(v[8:], c)
	a, _, _, _ := cpuid(1, 0)
	family = a >> 8 & 0xf
	if family == 0xf {
		family += a >> 20 & 0xff
	}
	return string(v[:]), family
}

// slowPEXT reports whether the CPU runs PEXT in microcode, taking tens to
// hundreds of cycles for the masks the assembly loop uses (one PEXT per
// integer of two bytes or more): AMD before Zen 3 (family 0x19) and
// Hygon's Zen-based Dhyana. There the assembly loop would be slower than
// fastLoop.
func slowPEXT(vendor string, family uint32) bool {
	switch vendor {
	case "AuthenticAMD":
		return family < 0x19
	case "HygonGenuine":
		return true
	}
	return false
}
