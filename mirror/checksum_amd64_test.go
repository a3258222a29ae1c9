package mirror

func vectorEnabled() bool { return useAVX2 }
func setAVX2(v bool)      { useAVX2 = v }
