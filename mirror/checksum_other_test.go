//go:build !amd64

package mirror

func vectorEnabled() bool { return false }
func setAVX2(bool)        {}
