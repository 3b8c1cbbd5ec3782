package eventstore

import (
	"encoding/json"
	"fmt"
	"sync"
)

// Registry knows every event type the process may write or read, its current
// schema version, and how to lift old payloads to it. The store refuses to
// write a type it does not know and refuses (loudly) to read one: silently
// skipping an event would fold a wrong state, and with money that is worse
// than stopping.
type Registry struct {
	mu    sync.RWMutex
	types map[string]*eventTypeInfo
}

type eventTypeInfo struct {
	current   int
	upcasters map[int]func(json.RawMessage) (json.RawMessage, error) // from -> from+1
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{types: make(map[string]*eventTypeInfo)}
}

// Register declares eventType with its current schema version (>= 1).
// It panics on a duplicate or invalid registration: registrations are
// program wiring, and a mistake there must stop the program at start.
func (r *Registry) Register(eventType string, currentSchema int) {
	if err := validHeaderValue(eventType); err != nil {
		panic(fmt.Sprintf("eventstore: Register(%q): %v", eventType, err))
	}
	if currentSchema < 1 {
		panic(fmt.Sprintf("eventstore: Register(%q): schema version %d < 1", eventType, currentSchema))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.types[eventType]; dup {
		panic(fmt.Sprintf("eventstore: Register(%q): already registered", eventType))
	}
	r.types[eventType] = &eventTypeInfo{
		current:   currentSchema,
		upcasters: make(map[int]func(json.RawMessage) (json.RawMessage, error)),
	}
}

// Upcaster registers the step that lifts a payload of eventType from schema
// fromSchema to fromSchema+1. Reading applies the steps in order up to the
// current version. It panics on an unregistered type, a step outside
// [1, current), or a duplicate step.
func (r *Registry) Upcaster(eventType string, fromSchema int, up func(json.RawMessage) (json.RawMessage, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	info, ok := r.types[eventType]
	if !ok {
		panic(fmt.Sprintf("eventstore: Upcaster(%q): type not registered", eventType))
	}
	if fromSchema < 1 || fromSchema >= info.current {
		panic(fmt.Sprintf("eventstore: Upcaster(%q, %d): must lift a version in [1, %d)", eventType, fromSchema, info.current))
	}
	if up == nil {
		panic(fmt.Sprintf("eventstore: Upcaster(%q, %d): nil function", eventType, fromSchema))
	}
	if _, dup := info.upcasters[fromSchema]; dup {
		panic(fmt.Sprintf("eventstore: Upcaster(%q, %d): already registered", eventType, fromSchema))
	}
	info.upcasters[fromSchema] = up
}

// CurrentSchema reports the current schema version of eventType.
func (r *Registry) CurrentSchema(eventType string) (int, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	info, ok := r.types[eventType]
	if !ok {
		return 0, false
	}
	return info.current, true
}

// upcast lifts payload from schema `stored` to the current version.
func (r *Registry) upcast(eventType string, stored int, payload json.RawMessage) (json.RawMessage, int, error) {
	r.mu.RLock()
	info, ok := r.types[eventType]
	var steps []func(json.RawMessage) (json.RawMessage, error)
	if ok && stored >= 1 && stored < info.current {
		steps = make([]func(json.RawMessage) (json.RawMessage, error), 0, info.current-stored)
		for v := stored; v < info.current; v++ {
			up := info.upcasters[v]
			if up == nil {
				r.mu.RUnlock()
				return nil, 0, fmt.Errorf("%w: %s schema %d has no upcaster to %d", ErrUnknownSchema, eventType, v, v+1)
			}
			steps = append(steps, up)
		}
	}
	r.mu.RUnlock()
	switch {
	case !ok:
		return nil, 0, fmt.Errorf("%w: %q", ErrUnknownEventType, eventType)
	case stored < 1:
		return nil, 0, fmt.Errorf("%w: %s schema %d", ErrUnknownSchema, eventType, stored)
	case stored > info.current:
		return nil, 0, fmt.Errorf("%w: %s schema %d is newer than known %d", ErrUnknownSchema, eventType, stored, info.current)
	}
	// The upcasters run outside the lock: they are caller code.
	for i, up := range steps {
		next, err := up(payload)
		if err != nil {
			return nil, 0, fmt.Errorf("eventstore: upcast %s schema %d -> %d: %w", eventType, stored+i, stored+i+1, err)
		}
		if !json.Valid(next) {
			return nil, 0, fmt.Errorf("eventstore: upcast %s schema %d -> %d: result is not JSON", eventType, stored+i, stored+i+1)
		}
		payload = next
	}
	return payload, info.current, nil
}
