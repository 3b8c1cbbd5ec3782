package eventstore

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DerivedStreamConfig is the configuration of a stream weir derives from
// the event log (notifications, the history index): limits retention with
// no limit, append-only (deny delete and purge) like the log itself, a
// de-duplication window, and direct gets for readers. replicas below 1
// means 1.
func DerivedStreamConfig(name, description string, subjects []string, replicas int, memory bool, duplicates time.Duration) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if memory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    subjects,
		Retention:   jetstream.LimitsPolicy,
		Storage:     storage,
		Replicas:    max(replicas, 1),
		Duplicates:  duplicates,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
	}
}
