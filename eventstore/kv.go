package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// KeyValue opens (creating if needed) a KV bucket of data derived from the
// log (checkpoints, snapshots), with one version per key and the storage
// kind and replica count of the event stream: derived data of a memory log
// must not outlive it on disk, and a replicated log deserves replicated
// derived data.
func (s *Store) KeyValue(ctx context.Context, js jetstream.JetStream, bucket, description string) (jetstream.KeyValue, error) {
	stream, err := js.Stream(ctx, s.StreamName())
	if err != nil {
		return nil, fmt.Errorf("eventstore: look up stream %s: %w", s.StreamName(), err)
	}
	sc := stream.CachedInfo().Config
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: description,
			History:     1,
			Storage:     sc.Storage,
			Replicas:    sc.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket) // created concurrently
		}
	}
	if err != nil {
		return nil, fmt.Errorf("eventstore: bucket %s: %w", bucket, err)
	}
	return kv, nil
}
