//go:build !linux

package dmaring

import "sync"

// notifier is a channel of one slot; Close closes done.
type notifier struct {
	ch   chan struct{}
	done chan struct{}
	once *sync.Once
}

func newNotifier() (notifier, error) {
	return notifier{ch: make(chan struct{}, 1), done: make(chan struct{}), once: new(sync.Once)}, nil
}

func (n *notifier) notify() {
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

func (n *notifier) wait() error {
	select {
	case <-n.ch:
		return nil
	case <-n.done:
		return ErrClosed
	}
}

func (n *notifier) close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}
