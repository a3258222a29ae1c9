//go:build !linux

package main

import "fmt"

func setupMcastRx(params) (*pair, error) {
	return nil, fmt.Errorf("%w: TAP devices and network namespaces need Linux", errSkip)
}
