package capgen

// The truth seen from a receiver: what a correct reassembler and decoder
// must report for a generated feed.

// Gaps returns the lost ranges a reassembler must report as gaps: every
// lost range before the flow's last byte (a loss at the very end of the
// stream is not a gap, nothing is delivered after it). Never nil.
func (fl *Flow) Gaps() []Range {
	gaps := []Range{}
	for _, l := range fl.Lost {
		if l.Offset+l.Length < fl.StreamBytes {
			gaps = append(gaps, l)
		}
	}
	return gaps
}

// Recoverable reports whether r can be decoded from the capture: no lost
// range of its flow touches its STEP message.
func (f *Feed) Recoverable(r *Record) bool {
	for _, l := range f.Flows[r.Flow].Lost {
		if r.Start < l.Offset+l.Length && l.Offset < r.End {
			return false
		}
	}
	return true
}

// SequenceGap is a break in a STEP category's sequence numbers (10072) as a
// receiver sees it: the message numbered Got arrived where Expected was due.
type SequenceGap struct {
	Category      uint32
	Expected, Got uint64
}

// SequenceGaps returns the sequence breaks a decoder of flow fi's
// recoverable messages reports, in stream order: per category, the first
// message received sets the sequence and every later one that does not
// follow the previous one received is a break. Messages lost at the end of
// a category break nothing.
func (f *Feed) SequenceGaps(fi int) []SequenceGap {
	var gaps []SequenceGap
	last := map[uint32]uint64{}
	for i := range f.Records {
		r := &f.Records[i]
		if r.Flow != fi || r.Index != 0 || !f.Recoverable(r) {
			continue
		}
		if prev, ok := last[r.Category]; ok && r.CategorySeq != prev+1 {
			gaps = append(gaps, SequenceGap{r.Category, prev + 1, r.CategorySeq})
		}
		last[r.Category] = r.CategorySeq
	}
	return gaps
}
