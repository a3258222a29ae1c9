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
