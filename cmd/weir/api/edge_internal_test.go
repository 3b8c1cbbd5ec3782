package api

import (
	"fmt"
	"testing"
	"time"
)

// Buckets of many client addresses cannot grow the limiter without bound:
// past maxBuckets, the full (idle) ones are forgotten.
func TestRateLimiterForgetsIdleBucketsBeyondItsBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRateLimiter(1, func() time.Time { return now })
	for i := range maxBuckets {
		if err := r.allow(fmt.Sprint("addr-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.allow("busy"); err != nil { // one bucket still spending
		t.Fatal(err)
	}
	now = now.Add(time.Minute) // every earlier bucket has refilled
	_ = r.allow("busy")
	if err := r.allow("new"); err != nil {
		t.Fatal(err)
	}
	if n := len(r.buckets); n > 3 {
		t.Fatalf("%d buckets kept, want the idle ones forgotten", n)
	}
}
