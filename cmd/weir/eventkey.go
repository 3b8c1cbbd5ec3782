package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
)

// devEventKeyFile is where a weir with an embedded store and no --event-key
// keeps the key it generated, inside --data: the key must outlive the
// process (events signed with it are read back on every start) and must
// not leave the machine that holds the log.
const devEventKeyFile = "event.key"

// loadEventKey reads an --event-key file: "<key-id> <hex secret>" lines,
// the first signs, the others verify (rotation). A key file that its group
// or others may read or write is refused: the key is what keeps a leaked
// NATS credential from writing money into the log.
func loadEventKey(path string) (*eventstore.Keyring, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--event-key: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("--event-key %s: mode %v lets others read or change it; chmod 600 it", path, perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--event-key: %w", err)
	}
	kr, err := eventstore.ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("--event-key %s: %w", path, err)
	}
	return kr, nil
}

// newEventKeyLine is one fresh key line: a random id and a 32-byte secret.
func newEventKeyLine() (string, error) {
	var id [4]byte
	secret := make([]byte, eventstore.MinKeyBytes)
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	return "k-" + hex.EncodeToString(id[:]) + " " + hex.EncodeToString(secret) + "\n", nil
}

// devEventKey returns the key kept in dir, generating it (mode 0600) on
// the first start. memory: the store does not outlive the process, so
// neither does the key.
func devEventKey(dir string, memory bool) (*eventstore.Keyring, string, error) {
	line, err := newEventKeyLine()
	if err != nil {
		return nil, "", err
	}
	if memory {
		kr, err := eventstore.ParseKeyring([]byte(line))
		return kr, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("event key: %w", err)
	}
	path := filepath.Join(dir, devEventKeyFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		kr, err := loadEventKey(path)
		return kr, path, err
	case err != nil:
		return nil, "", fmt.Errorf("event key: %w", err)
	}
	_, werr := f.WriteString("# weir event key, generated at first start; keep it with the store, never share it\n" + line)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, "", fmt.Errorf("event key %s: %w", path, err)
	}
	kr, err := loadEventKey(path)
	return kr, path, err
}

// eventKey is the keyring serve authenticates events with: --event-key, or
// the key kept in --data. With --nats-url and no --event-key it returns nil:
// the key is the one every weir process on that NATS shares (sharedEventKey),
// read once connected.
func eventKey(cfg serveConfig, devMode bool, log *slog.Logger) (*eventstore.Keyring, error) {
	if cfg.EventKey != "" {
		kr, err := loadEventKey(cfg.EventKey)
		if err == nil {
			log.Info("events authenticated", "key_file", cfg.EventKey, "signing_key_id", kr.CurrentKeyID())
		}
		return kr, err
	}
	if cfg.NATSURL != "" {
		return nil, nil
	}
	kr, path, err := devEventKey(cfg.Data, cfg.memory)
	if err != nil {
		return nil, err
	}
	if devMode {
		log.Info("events authenticated with the key kept in --data", "key_file", path, "signing_key_id", kr.CurrentKeyID())
	} else {
		log.Warn("no --event-key: events are authenticated with the key generated in --data; back it up with the store, or pass --event-key", "key_file", path, "signing_key_id", kr.CurrentKeyID())
	}
	return kr, nil
}

// sharedKeyName is the key in natsauth.KeyBucket that holds the key file.
const sharedKeyName = "event-key"

// sharedEventKey is the event key of every weir process on an external NATS
// without --event-key: kept in the KV bucket natsauth.KeyBucket. The first
// process creates it with a create-only put; a process that loses that race,
// and every later one, reads the winner's. A key an older weir generated in
// --data (event.key) is what the first process publishes, so the events it
// signed keep verifying.
func sharedEventKey(ctx context.Context, nc *nats.Conn, cfg serveConfig) (*eventstore.Keyring, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	storage := jetstream.FileStorage
	if cfg.memory {
		storage = jetstream.MemoryStorage
	}
	kv, err := js.KeyValue(ctx, natsauth.KeyBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsauth.KeyBucket,
			Description: "weir: the event key shared by weir processes started without --event-key",
			History:     1, Storage: storage, Replicas: max(cfg.Replicas, 1)})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, natsauth.KeyBucket) // created concurrently
		}
	}
	if err != nil {
		return nil, fmt.Errorf("event key bucket %s: %w", natsauth.KeyBucket, err)
	}
	var line []byte
	if legacy, err := os.ReadFile(filepath.Join(cfg.Data, devEventKeyFile)); err == nil && !cfg.memory {
		line = legacy
	} else {
		l, err := newEventKeyLine()
		if err != nil {
			return nil, err
		}
		line = []byte(l)
	}
	if _, err := kv.Create(ctx, sharedKeyName, line); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("event key bucket %s: %w", natsauth.KeyBucket, err)
		}
		entry, err := kv.Get(ctx, sharedKeyName)
		if err != nil {
			return nil, fmt.Errorf("event key bucket %s: %w", natsauth.KeyBucket, err)
		}
		line = entry.Value()
	}
	kr, err := eventstore.ParseKeyring(line)
	if err != nil {
		return nil, fmt.Errorf("event key bucket %s: %w", natsauth.KeyBucket, err)
	}
	return kr, nil
}

// integrityHealth is /healthz's view of quarantined events: degraded, with
// the stream sequences named, as long as the log holds any.
func integrityHealth(store *eventstore.Store) error {
	vs, n := store.Violations()
	if n == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d event(s) in the log failed verification and are quarantined (never folded into any state):", n)
	for i, v := range vs {
		if i == 5 {
			fmt.Fprintf(&b, " …")
			break
		}
		where := v.Subject
		if where == "" {
			where = v.Key.Type + "/" + v.Key.ID
		}
		fmt.Fprintf(&b, " stream seq %d (%s, %q)", v.Sequence, where, v.Type)
	}
	return &aggregate.Error{Code: sagas.CodeIntegrityViolation, Message: b.String()}
}
