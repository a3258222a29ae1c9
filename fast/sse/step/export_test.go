package step

// setVector selects Checksum's vector loop (where there is one) or the
// portable code and returns a function restoring the previous choice.
func setVector(on bool) (restore func()) {
	old := useAVX2
	useAVX2 = on && old
	return func() { useAVX2 = old }
}
