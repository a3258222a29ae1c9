package stopbit

// ScanGo is the portable Scan, for comparison with the kernel.
var ScanGo = scanGo

// SetKernel selects the kernel (when the CPU has it) or the portable loop for
// Scan and returns a function restoring the previous choice.
func SetKernel(on bool) (restore func()) {
	old := useKernel
	useKernel = on && Accelerated
	return func() { useKernel = old }
}
