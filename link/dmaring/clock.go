package dmaring

// DeviceClock reads the device clock register (seconds and nanoseconds on
// the device's PTP-like clock, which starts from the host's real-time
// clock), retrying while the device is writing it. ok is false when the
// device has not set it yet.
func (r *Region) DeviceClock() (sec uint64, ns uint32, ok bool) {
	for range 1000 {
		s1 := r.Load32(HdrClockSeq)
		if s1&1 != 0 {
			continue
		}
		ns = r.Load32(HdrClockNs)
		sec = uint64(r.Load32(HdrClockSecLo)) | uint64(r.Load32(HdrClockSecHi))<<32
		if r.Load32(HdrClockSeq) == s1 {
			return sec, ns, s1 != 0
		}
	}
	return 0, 0, false
}

// SetDeviceClock writes the device clock register (device side).
func (r *Region) SetDeviceClock(sec uint64, ns uint32) {
	s := r.Load32(HdrClockSeq)
	r.Store32(HdrClockSeq, s|1)
	r.Store32(HdrClockNs, ns)
	r.Store32(HdrClockSecLo, uint32(sec))
	r.Store32(HdrClockSecHi, uint32(sec>>32))
	r.Store32(HdrClockSeq, (s|1)+1)
}

// stampClock turns completions' times (nanoseconds and the low 16 bits of
// the seconds) into Unix nanoseconds for one reader of a completion queue.
// As mqnic_read_cpl_ts does, it keeps the full seconds and rereads the
// device clock register when bits 15:8 of a stamp's seconds differ from
// them (every 256 s); unlike it, it also takes a stamp from just across a
// 2^16 s wrap of the register to the nearer value.
type stampClock struct {
	sec   uint64 // full device seconds the last stamp was extended with
	valid bool
}

// unix returns the stamp (ns, s16) in Unix nanoseconds, 0 while the device
// has not set its clock register.
func (c *stampClock) unix(r *Region, ns uint32, s16 uint16) int64 {
	if !c.valid || (c.sec^uint64(s16))&0xff00 != 0 {
		if sec, _, ok := r.DeviceClock(); ok {
			c.sec, c.valid = sec, true
		}
		if !c.valid {
			return 0
		}
	}
	sec := c.sec&^0xffff | uint64(s16)
	if sec > c.sec+0x8000 && sec >= 0x10000 {
		sec -= 0x10000
	} else if sec+0x8000 < c.sec {
		sec += 0x10000
	}
	return int64(sec)*1e9 + int64(ns)
}
