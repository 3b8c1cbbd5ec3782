package webhook

import "github.com/nats-io/nats.go/jetstream"

// WrapDeliveries puts wrap around the deliveries bucket (tests watch what
// a listing reads).
func WrapDeliveries(s *Service, wrap func(jetstream.KeyValue) jetstream.KeyValue) {
	s.deliveries = wrap(s.deliveries)
}
