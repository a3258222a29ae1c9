package step

import "strconv"

// Header holds the STEP fields that AppendMessage writes around a payload.
// Empty byte-slice fields are omitted; so are Category and CategorySeq when
// HasCategory is false.
type Header struct {
	MsgType      []byte // 35, e.g. "UA3201"; written even when empty
	SenderCompID []byte // 49, e.g. "VDE"
	TargetCompID []byte // 56, e.g. "VSS"
	SeqNum       uint64 // 34
	SendingTime  []byte // 52, e.g. "20260105-09:30:00.000"
	// HasCategory selects whether 10142 (Category) and 10072
	// (CategorySeq) are written.
	HasCategory bool
	Category    uint32
	CategorySeq uint64
}

// AppendMessage appends one STEP message carrying payload as raw data (95 and
// 96; omitted when payload is empty) to dst and returns the extended slice.
// Fields are written in the order 8, 9, 35, 49, 56, 34, 52, 10142, 10072, 95,
// 96, 10. It allocates only when dst lacks capacity.
func AppendMessage(dst []byte, h *Header, payload []byte) []byte {
	body := tagLen(TagMsgType) + len(h.MsgType) + 1 +
		optBytesLen(TagSenderCompID, h.SenderCompID) +
		optBytesLen(TagTargetCompID, h.TargetCompID) +
		tagLen(TagMsgSeqNum) + uintLen(h.SeqNum) + 1 +
		optBytesLen(TagSendingTime, h.SendingTime)
	if h.HasCategory {
		body += tagLen(TagCategory) + uintLen(uint64(h.Category)) + 1 +
			tagLen(TagCategorySeq) + uintLen(h.CategorySeq) + 1
	}
	if len(payload) > 0 {
		body += tagLen(TagRawDataLength) + uintLen(uint64(len(payload))) + 1 +
			tagLen(TagRawData) + len(payload) + 1
	}

	start := len(dst)
	dst = append(dst, "8="+BeginString+"\x019="...)
	dst = strconv.AppendUint(dst, uint64(body), 10)
	dst = append(dst, SOH)
	dst = appendField(dst, TagMsgType, h.MsgType)
	if len(h.SenderCompID) > 0 {
		dst = appendField(dst, TagSenderCompID, h.SenderCompID)
	}
	if len(h.TargetCompID) > 0 {
		dst = appendField(dst, TagTargetCompID, h.TargetCompID)
	}
	dst = appendUintField(dst, TagMsgSeqNum, h.SeqNum)
	if len(h.SendingTime) > 0 {
		dst = appendField(dst, TagSendingTime, h.SendingTime)
	}
	if h.HasCategory {
		dst = appendUintField(dst, TagCategory, uint64(h.Category))
		dst = appendUintField(dst, TagCategorySeq, h.CategorySeq)
	}
	if len(payload) > 0 {
		dst = appendUintField(dst, TagRawDataLength, uint64(len(payload)))
		dst = appendField(dst, TagRawData, payload)
	}
	sum := Checksum(dst[start:])
	return append(dst, '1', '0', '=', byte('0'+sum/100), byte('0'+sum/10%10), byte('0'+sum%10), SOH)
}

func appendField(dst []byte, tag int, v []byte) []byte {
	dst = strconv.AppendUint(dst, uint64(tag), 10)
	dst = append(dst, '=')
	dst = append(dst, v...)
	return append(dst, SOH)
}

func appendUintField(dst []byte, tag int, v uint64) []byte {
	dst = strconv.AppendUint(dst, uint64(tag), 10)
	dst = append(dst, '=')
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, SOH)
}

// tagLen is the length of "<tag>=".
func tagLen(tag int) int { return uintLen(uint64(tag)) + 1 }

func optBytesLen(tag int, v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return tagLen(tag) + len(v) + 1
}

func uintLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}
