//go:build !linux

package hwoffload

import "fmt"

// mapDMA needs VFIO: Linux only.
func mapDMA(dir string, size int) (*dmaBuffer, error) {
	return nil, fmt.Errorf("%w: VFIO DMA memory is Linux only", ErrNotImplemented)
}
