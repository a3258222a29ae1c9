//go:build !linux

package dmaring

import "os"

func newFileRegion(Layout, string) (*Region, error) { return nil, ErrNotSupported }

func mapFile(*os.File, bool) (*Region, error) { return nil, ErrNotSupported }
