//go:build !linux

package main

import "fmt"

func setupTapRTT(bool) func(params) (*pair, error) {
	return func(params) (*pair, error) {
		return nil, fmt.Errorf("%w: TAP devices and network namespaces need Linux", errSkip)
	}
}

func setupXDPRTT(params) (*pair, error) {
	return nil, fmt.Errorf("%w: AF_XDP and network namespaces need Linux", errSkip)
}

func setupXDPCapture(params) (*pair, error) {
	return nil, fmt.Errorf("%w: AF_XDP and AF_PACKET need Linux", errSkip)
}

func setupXDPRxRate(params) (*pair, error) {
	return nil, fmt.Errorf("%w: AF_XDP and AF_PACKET need Linux", errSkip)
}

func cleanupStale() {}

func setupTapRTTLocked(params) (*pair, error) {
	return nil, fmt.Errorf("%w: TAP devices and network namespaces need Linux", errSkip)
}

func setupBulkVeth(params) (*pair, error) {
	return nil, fmt.Errorf("%w: TAP devices and network namespaces need Linux", errSkip)
}
