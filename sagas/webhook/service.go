package webhook

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
)

// KV buckets of the room. Only weir's own identity may touch them (no
// principal has $KV or $JS.API rights on KV_*).
const (
	// SecretsBucket holds secret.<id> (the signing secret) and cursor.<id>
	// (the last WEIR_NOTIFY sequence delivered or given up).
	SecretsBucket = "weir_webhooks"
	// DeliveriesBucket holds <id>.<WEIR_NOTIFY sequence>: one delivery and
	// its attempts.
	DeliveriesBucket = "weir_webhook_deliveries"
	// DeliveryHistory is how long delivery records are kept.
	DeliveryHistory = 30 * 24 * time.Hour
)

// Config configures the Service.
type Config struct {
	Replicas int
	Memory   bool
	Guard    Guard
	Now      func() time.Time // nil: time.Now
}

// Service keeps registrations (in the log), secrets, cursors and delivery
// records.
type Service struct {
	store      *eventstore.Store
	notify     jetstream.Stream
	secrets    jetstream.KeyValue
	deliveries jetstream.KeyValue
	guard      Guard
	now        func() time.Time
}

// Open creates the buckets (or finds them) and returns the Service.
// notify is WEIR_NOTIFY: a registration starts after its last message.
func Open(ctx context.Context, js jetstream.JetStream, store *eventstore.Store, notify jetstream.Stream, cfg Config) (*Service, error) {
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	replicas := max(cfg.Replicas, 1)
	secrets, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: SecretsBucket,
		Description: "weir: webhook secrets and delivery cursors", History: 1, Storage: storage, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("webhook: bucket %s: %w", SecretsBucket, err)
	}
	deliveries, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: DeliveriesBucket,
		Description: "weir: webhook deliveries and their attempts", History: 1, TTL: DeliveryHistory, Storage: storage, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("webhook: bucket %s: %w", DeliveriesBucket, err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, notify: notify, secrets: secrets, deliveries: deliveries, guard: cfg.Guard, now: now}, nil
}

// View is a webhook as the API shows it. Secret is set only in the reply
// to its registration.
type View struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Accounts  []string  `json:"accounts"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	Secret    string    `json:"secret,omitempty"`
}

// ViewOf renders a registration.
func ViewOf(h aggregate.Webhook) View {
	v := View{ID: h.ID, URL: h.URL, Events: h.Events, Accounts: h.Accounts, CreatedBy: h.CreatedBy, CreatedAt: h.CreatedAt}
	if v.Events == nil {
		v.Events = []string{}
	}
	if v.Accounts == nil {
		v.Accounts = []string{}
	}
	return v
}

// RegisterInput is POST /v1/webhooks.
type RegisterInput struct {
	URL      string   `json:"url"`
	Events   []string `json:"events"`
	Accounts []string `json:"accounts"`
	By       string   `json:"-"`
}

// Register records a new webhook and returns it with its secret — the only
// time the secret is shown.
func (s *Service) Register(ctx context.Context, in RegisterInput) (View, error) {
	u, err := s.guard.CheckURL(ctx, in.URL)
	if err != nil {
		return View{}, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return View{}, fmt.Errorf("webhook: secret: %w", err)
	}
	secret := "whsec_" + hex.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(secret))
	info, err := s.notify.Info(ctx)
	if err != nil {
		return View{}, fmt.Errorf("webhook: %w", err)
	}
	id := "wh_" + strings.ToLower(eventstore.NewEventID())
	events, err := aggregate.DecideRegisterWebhook(aggregate.Webhook{}, aggregate.RegisterWebhook{
		ID: id, URL: u, Events: in.Events, Accounts: in.Accounts, FromNotifySeq: info.State.LastSeq,
		SecretSHA256: hex.EncodeToString(sum[:]), By: in.By, At: s.now(),
	})
	if err != nil {
		return View{}, err
	}
	// The secret is stored before the registration: a registration in the
	// log always has its secret.
	if _, err := s.secrets.Create(ctx, "secret."+id, []byte(secret)); err != nil {
		return View{}, fmt.Errorf("webhook: storing the secret: %w", err)
	}
	if _, err := s.store.Append(ctx, key(id), eventstore.Position{}, toStore(events)...); err != nil {
		return View{}, fmt.Errorf("webhook: %w", err)
	}
	h := aggregate.EvolveWebhook(aggregate.Webhook{}, events[0])
	v := ViewOf(h)
	v.Secret = secret
	return v, nil
}

func key(id string) eventstore.Key { return eventstore.Key{Type: eventlog.TypeWebhook, ID: id} }

func toStore(events []aggregate.WebhookEvent) []eventstore.Event {
	out := make([]eventstore.Event, len(events))
	for i, e := range events {
		out[i] = eventstore.Event{ID: eventstore.NewEventID(), Type: e.EventType(), Data: e}
	}
	return out
}

func notFound(id string) error {
	return &aggregate.Error{Code: sagas.CodeNotFound, Field: "id", Message: fmt.Sprintf("no webhook %s", id)}
}

// Get loads one registration (deleted ones too).
func (s *Service) Get(ctx context.Context, id string) (aggregate.Webhook, eventstore.Position, error) {
	if key(id).Validate() != nil {
		return aggregate.Webhook{}, eventstore.Position{}, notFound(id)
	}
	recs, pos, err := s.store.Load(ctx, key(id))
	if err != nil {
		return aggregate.Webhook{}, pos, fmt.Errorf("webhook %s: %w", id, err)
	}
	events, err := eventlog.WebhookEvents(recs)
	if err != nil {
		return aggregate.Webhook{}, pos, fmt.Errorf("webhook %s: %w", id, err)
	}
	var h aggregate.Webhook
	for _, e := range events {
		h = aggregate.EvolveWebhook(h, e)
	}
	if !h.Exists() {
		return h, pos, notFound(id)
	}
	return h, pos, nil
}

// List returns every registration that is not deleted, oldest first.
func (s *Service) List(ctx context.Context) ([]aggregate.Webhook, error) {
	hooks := map[string]aggregate.Webhook{}
	_, err := s.store.ReadAll(ctx, 1, eventlog.TypeWebhook, func(r eventstore.Record) error {
		e, err := aggregate.DecodeWebhookEvent(r.Type, r.Payload)
		if err != nil {
			return err
		}
		hooks[r.Key.ID] = aggregate.EvolveWebhook(hooks[r.Key.ID], e)
		return nil
	}, eventstore.OnViolation(func(*eventstore.IntegrityError) error { return nil }))
	if err != nil {
		return nil, fmt.Errorf("webhook: list: %w", err)
	}
	out := make([]aggregate.Webhook, 0, len(hooks))
	for _, h := range hooks {
		if h.Exists() && !h.Deleted {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b aggregate.Webhook) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Delete ends a webhook; deleting a deleted one again changes nothing.
func (s *Service) Delete(ctx context.Context, id, by string) (aggregate.Webhook, error) {
	for range 5 {
		h, pos, err := s.Get(ctx, id)
		if err != nil {
			return h, err
		}
		events, err := aggregate.DecideDeleteWebhook(h, by, s.now())
		if err != nil || len(events) == 0 {
			return h, err
		}
		_, err = s.store.Append(ctx, key(id), pos, toStore(events)...)
		if errors.Is(err, eventstore.ErrConflict) {
			continue
		}
		if err != nil {
			return h, fmt.Errorf("webhook %s: %w", id, err)
		}
		for _, e := range events {
			h = aggregate.EvolveWebhook(h, e)
		}
		return h, nil
	}
	return aggregate.Webhook{}, fmt.Errorf("webhook %s: too much contention", id)
}

// secret returns a webhook's signing secret.
func (s *Service) secret(ctx context.Context, id string) (string, error) {
	e, err := s.secrets.Get(ctx, "secret."+id)
	if err != nil {
		return "", fmt.Errorf("webhook %s: secret: %w", id, err)
	}
	return string(e.Value()), nil
}

// Attempt is one POST of a delivery.
type Attempt struct {
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	Outcome    string    `json:"outcome"`
}

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusAbandoned = "abandoned"
)

// maxAttemptsKept bounds a delivery record's attempt history (Attempts
// keeps counting).
const maxAttemptsKept = 20

// Delivery is one notification's way to one webhook.
type Delivery struct {
	WebhookID string `json:"webhook_id"`
	EventID   string `json:"event_id"`
	// Type is the notification's type; WithdrawalID and State are empty
	// for a wallet notification.
	Type          string     `json:"type"`
	WithdrawalID  string     `json:"withdrawal_id"`
	State         string     `json:"state"`
	NotifySeq     uint64     `json:"notify_seq"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	FirstAttempt  time.Time  `json:"first_attempt_at"`
	LastAttempt   time.Time  `json:"last_attempt_at"`
	NextAttempt   *time.Time `json:"next_attempt_at"`
	DeliveredAt   *time.Time `json:"delivered_at"`
	RecentHistory []Attempt  `json:"history"`
}

func deliveryKey(id string, seq uint64) string { return fmt.Sprintf("%s.%020d", id, seq) }

func (s *Service) delivery(ctx context.Context, id string, seq uint64) (Delivery, bool, error) {
	e, err := s.deliveries.Get(ctx, deliveryKey(id, seq))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("webhook %s: delivery %d: %w", id, seq, err)
	}
	var d Delivery
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return Delivery{}, false, fmt.Errorf("webhook %s: delivery %d: %w", id, seq, err)
	}
	return d, true, nil
}

func (s *Service) putDelivery(ctx context.Context, d Delivery) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := s.deliveries.Put(ctx, deliveryKey(d.WebhookID, d.NotifySeq), b); err != nil {
		return fmt.Errorf("webhook %s: recording delivery %d: %w", d.WebhookID, d.NotifySeq, err)
	}
	return nil
}

// Deliveries lists a webhook's deliveries newest first (by WEIR_NOTIFY
// sequence): at most limit, only those below before (0: from the newest).
// next is the cursor of the following page (its last delivery's
// sequence), 0 when there is none.
//
// It reads only this webhook's records: the names of its keys (the
// server filters the bucket on the key prefix "<id>." and sends names
// only, no values) and then the values of the page's records alone. The
// key format is the one deliveries were always stored under, so records
// written by earlier versions are listed as they are.
func (s *Service) Deliveries(ctx context.Context, id string, limit int, before uint64) (page []Delivery, next uint64, err error) {
	if limit <= 0 {
		return nil, 0, fmt.Errorf("webhook %s: deliveries: limit %d, want at least 1", id, limit)
	}
	if _, _, err := s.Get(ctx, id); err != nil {
		return nil, 0, err
	}
	seqs, err := s.deliverySeqs(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(seqs, func(a, b uint64) int { return cmp.Compare(b, a) })
	if before > 0 {
		seqs = seqs[sort.Search(len(seqs), func(i int) bool { return seqs[i] < before }):]
	}
	page = []Delivery{}
	for _, seq := range seqs {
		if len(page) == limit {
			return page, page[len(page)-1].NotifySeq, nil
		}
		d, ok, err := s.delivery(ctx, id, seq)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			continue // gone since it was listed (kept DeliveryHistory)
		}
		page = append(page, d)
	}
	return page, 0, nil
}

// deliverySeqs lists the WEIR_NOTIFY sequences of a webhook's delivery
// records from their key names alone.
func (s *Service) deliverySeqs(ctx context.Context, id string) ([]uint64, error) {
	lister, err := s.deliveries.ListKeysFiltered(ctx, id+".*")
	if err != nil {
		return nil, fmt.Errorf("webhook %s: deliveries: %w", id, err)
	}
	var seqs []uint64
	for k := range lister.Keys() {
		rest, ok := strings.CutPrefix(k, id+".")
		if !ok {
			continue
		}
		if seq, err := strconv.ParseUint(rest, 10, 64); err == nil {
			seqs = append(seqs, seq)
		}
	}
	return seqs, nil
}

// cursor is the last WEIR_NOTIFY sequence done for a webhook.
func (s *Service) cursor(ctx context.Context, h aggregate.Webhook) (uint64, error) {
	e, err := s.secrets.Get(ctx, "cursor."+h.ID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return h.FromNotifySeq, nil
	}
	if err != nil {
		return 0, fmt.Errorf("webhook %s: cursor: %w", h.ID, err)
	}
	var seq uint64
	if _, err := fmt.Sscan(string(e.Value()), &seq); err != nil {
		return 0, fmt.Errorf("webhook %s: cursor %q: %w", h.ID, e.Value(), err)
	}
	return seq, nil
}

func (s *Service) setCursor(ctx context.Context, id string, seq uint64) error {
	if _, err := s.secrets.Put(ctx, "cursor."+id, fmt.Appendf(nil, "%d", seq)); err != nil {
		return fmt.Errorf("webhook %s: cursor: %w", id, err)
	}
	return nil
}
