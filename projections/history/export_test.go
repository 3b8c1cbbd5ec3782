package history

import (
	"context"
	"sync/atomic"
	"time"
)

// CountLastReads makes x count its reads of an account's last entry.
// Tests only.
func CountLastReads(x *Indexer) *atomic.Int64 {
	var n atomic.Int64
	inner := x.lastFor
	x.lastFor = func(ctx context.Context, subject string) (uint64, error) {
		n.Add(1)
		return inner(ctx, subject)
	}
	return &n
}

// WrapLastFor puts wrap around x's reads of an account's last entry.
// Tests only.
func WrapLastFor(x *Indexer, wrap func(ctx context.Context, subject string, read func(context.Context, string) (uint64, error)) (uint64, error)) {
	inner := x.lastFor
	x.lastFor = func(ctx context.Context, subject string) (uint64, error) { return wrap(ctx, subject, inner) }
}

// SetPause sets how long x waits before following again. Tests only.
func SetPause(x *Indexer, d time.Duration) { x.pause = d }
