package aggregate

import (
	"slices"
	"strings"
	"time"
)

// Webhook event types: a registration's whole life in the log.
const (
	EventWebhookRegistered = "webhook.registered"
	EventWebhookDeleted    = "webhook.deleted"
)

// The kinds of event a webhook can ask for: a withdrawal's state changed,
// and the hot wallet's (issue 14): a balance crossed its low mark down or
// back up, sending paused or resumed.
const (
	WebhookEventStateChanged    = "withdrawal.state_changed"
	WebhookEventWalletLow       = "wallet.low"
	WebhookEventWalletRecovered = "wallet.recovered"
	WebhookEventSendingPaused   = "sending.paused"
	WebhookEventSendingResumed  = "sending.resumed"
)

// WebhookEventKinds lists what a webhook may ask for.
var WebhookEventKinds = []string{WebhookEventStateChanged, WebhookEventWalletLow, WebhookEventWalletRecovered,
	WebhookEventSendingPaused, WebhookEventSendingResumed}

// IsWalletEvent reports whether event is about the hot wallet (no account).
func IsWalletEvent(event string) bool {
	return event != WebhookEventStateChanged && slices.Contains(WebhookEventKinds, event)
}

// WebhookEvent is an event of a webhook registration's stream.
type WebhookEvent interface {
	EventType() string
	webhookEvent()
}

// WebhookRegistered records a new webhook. The secret is never in the log:
// SecretSHA256 lets the holder of the secret (kept elsewhere) show it is
// the one registered.
type WebhookRegistered struct {
	ID       string   `json:"id"`
	URL      string   `json:"url"`
	Events   []string `json:"events"`
	Accounts []string `json:"accounts"`
	// FromNotifySeq is the last notification (stream sequence of
	// WEIR_NOTIFY) before the registration: deliveries start after it.
	FromNotifySeq uint64    `json:"from_notify_seq"`
	SecretSHA256  string    `json:"secret_sha256"`
	By            string    `json:"by"`
	At            time.Time `json:"at"`
}

// WebhookDeleted ends a webhook: nothing more is delivered to it.
type WebhookDeleted struct {
	ID string    `json:"id"`
	By string    `json:"by"`
	At time.Time `json:"at"`
}

func (WebhookRegistered) EventType() string { return EventWebhookRegistered }
func (WebhookDeleted) EventType() string    { return EventWebhookDeleted }
func (WebhookRegistered) webhookEvent()     {}
func (WebhookDeleted) webhookEvent()        {}

// Webhook is a registration folded from its events.
type Webhook struct {
	ID            string
	URL           string
	Events        []string
	Accounts      []string
	FromNotifySeq uint64
	SecretSHA256  string
	CreatedBy     string
	CreatedAt     time.Time
	Deleted       bool
	DeletedBy     string
	DeletedAt     time.Time
	Version       uint64
}

// Exists reports whether the webhook was ever registered.
func (h Webhook) Exists() bool { return h.ID != "" }

// Wants reports whether the webhook asked for events of this kind about
// account. Wallet events are about no account: the account filter does
// not apply to them.
func (h Webhook) Wants(event, account string) bool {
	if h.Deleted || !slices.Contains(h.Events, event) {
		return false
	}
	return IsWalletEvent(event) || len(h.Accounts) == 0 || slices.Contains(h.Accounts, account)
}

// EvolveWebhook applies one event.
func EvolveWebhook(h Webhook, e WebhookEvent) Webhook {
	h.Version++
	switch ev := e.(type) {
	case WebhookRegistered:
		h.ID, h.URL, h.FromNotifySeq, h.SecretSHA256 = ev.ID, ev.URL, ev.FromNotifySeq, ev.SecretSHA256
		h.Events, h.Accounts = slices.Clone(ev.Events), slices.Clone(ev.Accounts)
		h.CreatedBy, h.CreatedAt = ev.By, ev.At
	case WebhookDeleted:
		h.Deleted, h.DeletedBy, h.DeletedAt = true, ev.By, ev.At
	}
	return h
}

// RegisterWebhook is an operator's registration; URL checks that need the
// network (what the host resolves to) are the caller's.
type RegisterWebhook struct {
	ID            string
	URL           string
	Events        []string
	Accounts      []string
	FromNotifySeq uint64
	SecretSHA256  string
	By            string
	At            time.Time
}

// DecideRegisterWebhook creates a webhook on an empty stream.
func DecideRegisterWebhook(h Webhook, c RegisterWebhook) ([]WebhookEvent, error) {
	if h.Exists() {
		return nil, newError(CodeInvalidTransition, "id", "webhook %s exists", c.ID)
	}
	if len(c.Events) == 0 {
		return nil, newError(CodeInvalidCommand, "events", "at least one event type")
	}
	for _, e := range c.Events {
		if !slices.Contains(WebhookEventKinds, e) {
			return nil, newError(CodeInvalidCommand, "events", "unknown event type %q (known: %s)", e, strings.Join(WebhookEventKinds, ", "))
		}
	}
	for _, a := range c.Accounts {
		if err := ValidateAccountID(a); err != nil {
			return nil, newError(CodeInvalidAccount, "accounts", "%q: %s", a, err.(*Error).Message)
		}
	}
	if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
		return nil, err
	}
	events := slices.Compact(slices.Sorted(slices.Values(c.Events)))
	accounts := slices.Compact(slices.Sorted(slices.Values(c.Accounts)))
	return []WebhookEvent{WebhookRegistered{ID: c.ID, URL: c.URL, Events: events, Accounts: accounts,
		FromNotifySeq: c.FromNotifySeq, SecretSHA256: c.SecretSHA256, By: c.By, At: c.At.UTC()}}, nil
}

// DecideDeleteWebhook deletes a webhook; deleting it again changes nothing.
func DecideDeleteWebhook(h Webhook, by string, at time.Time) ([]WebhookEvent, error) {
	if !h.Exists() {
		return nil, newError(CodeInvalidTransition, "id", "webhook not registered")
	}
	if h.Deleted {
		return nil, nil
	}
	return []WebhookEvent{WebhookDeleted{ID: h.ID, By: by, At: at.UTC()}}, nil
}

var webhookDecoders = map[string]decoder[WebhookEvent]{
	EventWebhookRegistered: decodeInto[WebhookRegistered, WebhookEvent],
	EventWebhookDeleted:    decodeInto[WebhookDeleted, WebhookEvent],
}

// WebhookEventTypes lists the webhook event types, sorted.
func WebhookEventTypes() []string { return sortedKeys(webhookDecoders) }

// DecodeWebhookEvent decodes a stored webhook event payload by type name.
func DecodeWebhookEvent(eventType string, data []byte) (WebhookEvent, error) {
	return decodeWith(webhookDecoders, eventType, data)
}
