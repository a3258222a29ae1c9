//go:build !linux

package dmaring

import "os"

func newFileRegion(Layout, string) (*Region, error) { return nil, ErrNotSupported }

func openFile(*os.File) (*Region, error) { return nil, ErrNotSupported }
