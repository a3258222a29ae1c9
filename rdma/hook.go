package rdma

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
)

// PayloadHook transforms each message's payload on the data path, between
// the transport and memory, as BALBOA's inline offloads do: the requester
// seals a WRITE's or SEND's bytes before they are cut into packets, and the
// responder gathers the message, opens it, and only then lets the result
// into the target memory (a region, or a receive buffer). A message that
// does not open is NAKed (remote operational error, the queue pair goes to
// ERROR) and counted in Stats.HookRejected; nothing of it reaches memory.
//
// Both ends of a connection use the same hook. Each message is sealed with
// a 12-byte nonce made of the PSN space (see Nonce). READs are not
// transformed: a READ on a queue pair with a hook is refused.
type PayloadHook interface {
	// Overhead is what Seal adds to a message.
	Overhead() int
	// Seal appends the transform of msg to dst and returns the result.
	// dst has room for len(msg)+Overhead() bytes.
	Seal(dst, msg []byte, nonce *[NonceSize]byte) []byte
	// Open reverses Seal in place: it returns the message in wire's own
	// memory, or an error when the check fails.
	Open(wire []byte, nonce *[NonceSize]byte) ([]byte, error)
}

// NonceSize is the length of a message's nonce: the sender's QPN (3 bytes),
// the receiver's QPN (3), a zero byte, the message's first PSN (3) and the
// number of times the PSNs of the sender's transformed messages have
// wrapped around 2^24 (2, big-endian). It is unique per message of a
// connection for 2^40 messages; the key must be unique per connection
// (two connections between the same QPNs and PSNs would repeat nonces).
const NonceSize = 12

// nonce fills n for the message with first PSN psn of epoch e, from src to
// dst.
func nonce(n *[NonceSize]byte, src, dst, psn uint32, e uint16) {
	put24(n[0:], src)
	put24(n[3:], dst)
	n[6] = 0
	put24(n[7:], psn)
	n[10], n[11] = byte(e>>8), byte(e)
}

// Limits of a hooked queue pair.
const (
	// DefaultHookMessage and MaxHookMessage are QPConfig.HookMessage's
	// default and largest value.
	DefaultHookMessage = 64 << 10
	MaxHookMessage     = 1 << 20
	// DefaultHookSlots and MaxHookSlots are QPConfig.HookSlots'.
	DefaultHookSlots = 16
	MaxHookSlots     = 256
)

// ErrHookMessage is PostSend's error for a message a hook cannot take: a
// READ, or longer than QPConfig.HookMessage.
var ErrHookMessage = errors.New("rdma: message not allowed with the payload hook")

// AESGCM is the AES-256-GCM payload hook (crypto/aes, crypto/cipher): a
// 16-byte tag per message, checked before the message reaches memory. Safe
// for concurrent use.
type AESGCM struct {
	aead cipher.AEAD
}

// NewAESGCM returns the hook for a 32-byte key.
func NewAESGCM(key []byte) (*AESGCM, error) {
	if len(key) != 32 {
		return nil, errors.New("rdma: AES-256-GCM needs a 32-byte key")
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &AESGCM{aead: a}, nil
}

// Overhead implements PayloadHook.Overhead: the 16-byte tag.
func (g *AESGCM) Overhead() int { return g.aead.Overhead() }

// Seal implements PayloadHook.Seal.
func (g *AESGCM) Seal(dst, msg []byte, n *[NonceSize]byte) []byte {
	return g.aead.Seal(dst, n[:], msg, nil)
}

// Open implements PayloadHook.Open.
func (g *AESGCM) Open(wire []byte, n *[NonceSize]byte) ([]byte, error) {
	return g.aead.Open(wire[:0], n[:], wire, nil)
}
