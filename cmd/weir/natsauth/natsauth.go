package natsauth

import (
	"crypto/subtle"
	"log/slog"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/sagas"
)

// Names of what the permissions refer to.
const (
	EventStream  = "WEIR_EVENTS"
	NotifyStream = "WEIR_NOTIFY"
	// WalletNotifications are the hot wallet's notifications (low marks,
	// sending paused/resumed) on WEIR_NOTIFY. Every principal that sees
	// every account (operators; requesters and approvers without an
	// account scope) reads them under weir.notify.>, as it may read GET
	// /v1/wallet; a principal scoped to accounts may not: its NATS rights
	// name only its accounts' subjects, and a pause's reason speaks of
	// another account's withdrawal. Nobody but weir publishes them.
	WalletNotifications = "weir.notify.wallet.>"
	// AuditInboxPrefix is the inbox prefix `weir audit` uses, so that the
	// event log it reads does not pass through _INBOX.>, which every
	// principal may subscribe.
	AuditInboxPrefix = "_WEIR_AUDIT"
	// KeyBucket is the KV bucket (stream KV_WEIR_KEYS) that holds the event
	// key weir processes on an external NATS share when no --event-key is
	// given. No principal or auditor has any right on it: only weir's own
	// identity.
	KeyBucket = "WEIR_KEYS"
)

// WeirDurables are the durable consumers weir itself relies on. No
// principal may create, update, pull from or delete them: a pull steals a
// delivery from the saga, a delete or an update (a new filter) stops it.
var WeirDurables = []string{sagas.LedgerConsumer}

// producerPublish is what every principal may publish.
var producerPublish = []string{
	"weir.cmd.>",
	"$SRV.>",
	// Consumers on the notification stream (producers may keep their own):
	// a durable pull consumer (`nats consumer add/next/info`), an ordered
	// pull consumer (nats.go) and an ordered push consumer with flow
	// control (`nats sub --stream`, nats.go's legacy OrderedConsumer).
	"$JS.API.STREAM.INFO." + NotifyStream,
	"$JS.API.CONSUMER.CREATE." + NotifyStream,
	"$JS.API.CONSUMER.CREATE." + NotifyStream + ".>",
	"$JS.API.CONSUMER.LIST." + NotifyStream,
	"$JS.API.CONSUMER.NAMES." + NotifyStream,
	"$JS.API.CONSUMER.DURABLE.CREATE." + NotifyStream + ".>",
	"$JS.API.CONSUMER.INFO." + NotifyStream + ".>",
	"$JS.API.CONSUMER.MSG.NEXT." + NotifyStream + ".>",
	"$JS.API.CONSUMER.DELETE." + NotifyStream + ".>",
	"$JS.ACK." + NotifyStream + ".>",
	"$JS.FC." + NotifyStream + ".>",
}

var producerSubscribe = []string{"_INBOX.>", "weir.notify.>"}

// auditorPublish is what an auditor may publish besides producerPublish:
// reads of the event stream and ephemeral consumers on it.
var auditorPublish = []string{
	"$JS.API.STREAM.INFO." + EventStream,
	"$JS.API.STREAM.MSG.GET." + EventStream,
	"$JS.API.DIRECT.GET." + EventStream,
	"$JS.API.DIRECT.GET." + EventStream + ".>",
	"$JS.API.CONSUMER.CREATE." + EventStream + ".*",
	"$JS.API.CONSUMER.CREATE." + EventStream + ".*.>",
	"$JS.API.CONSUMER.INFO." + EventStream + ".*",
	"$JS.API.CONSUMER.MSG.NEXT." + EventStream + ".*",
	"$JS.API.CONSUMER.DELETE." + EventStream + ".*",
}

var auditorSubscribe = []string{AuditInboxPrefix + ".>"}

// AuditorPublish is what the auditor role may publish on the event stream,
// allowed and denied: docs/nats-server.conf gives its auditor user exactly
// this (a test compares them).
func AuditorPublish() (allow, deny []string) {
	return append([]string(nil), auditorPublish...), auditorDeny()
}

// auditorDeny keeps the auditor's consumer rights off weir's durables.
func auditorDeny() []string {
	var deny []string
	for _, d := range WeirDurables {
		deny = append(deny,
			"$JS.API.CONSUMER.*."+EventStream+"."+d,
			"$JS.API.CONSUMER.*."+EventStream+"."+d+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+EventStream+"."+d,
		)
	}
	return deny
}

// Permissions are what a principal with these roles may do on the
// embedded server.
func Permissions(p api.Principal) *server.Permissions {
	pub := append([]string(nil), producerPublish...)
	sub := append([]string(nil), producerSubscribe...)
	if p.Scoped() {
		pub, sub = scopedProducer(p)
	}
	var deny, subDeny []string
	if p.Scoped() {
		// Belt and braces: no allow rule added later may reach them.
		subDeny = []string{WalletNotifications}
		deny = []string{"$JS.API.CONSUMER.CREATE." + NotifyStream + ".*." + WalletNotifications}
	}
	if p.Has(api.RoleAuditor) {
		pub = append(pub, auditorPublish...)
		sub = append(sub, auditorSubscribe...)
		deny = append(deny, auditorDeny()...)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: sub, Deny: subDeny},
	}
}

// scopedProducer is producerPublish/Subscribe for a principal scoped to
// accounts: notifications (and consumers on WEIR_NOTIFY, which must filter
// in the create subject) only for its accounts named exactly. A glob
// ("ops-*") cannot be written as a NATS subject rule, so it gets no
// notifications over NATS (webhooks can filter by account).
func scopedProducer(p api.Principal) (pub, sub []string) {
	pub = []string{"weir.cmd.>", "$SRV.>", "$JS.API.STREAM.INFO." + NotifyStream}
	sub = []string{"_INBOX.>"}
	for _, acct := range p.Accounts {
		if strings.ContainsAny(acct, "*?[\\") {
			continue
		}
		subj := "weir.notify.withdrawal." + acct + ".>"
		sub = append(sub, subj)
		pub = append(pub, "$JS.API.CONSUMER.CREATE."+NotifyStream+".*."+subj)
	}
	return append(pub,
		"$JS.API.CONSUMER.INFO."+NotifyStream+".>",
		"$JS.API.CONSUMER.MSG.NEXT."+NotifyStream+".>",
		"$JS.API.CONSUMER.DELETE."+NotifyStream+".>",
		"$JS.ACK."+NotifyStream+".>",
		"$JS.FC."+NotifyStream+".>",
	), sub
}

// Authenticator admits principals by token.
type Authenticator struct {
	principals *api.Principals
	log        *slog.Logger
}

// New returns an Authenticator over principals; refusals are logged (who
// claimed to connect and from where, never what they presented).
func New(principals *api.Principals, log *slog.Logger) *Authenticator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authenticator{principals: principals, log: log}
}

// Check implements server.Authentication.
func (a *Authenticator) Check(c server.ClientAuthentication) bool {
	opts := c.GetOpts()
	if opts == nil {
		return false
	}
	p, ok := a.resolve(opts)
	if !ok {
		a.log.Warn("NATS connection refused: no valid principal token", "remote", remote(c), "user", opts.Username, "client", opts.Name)
		return false
	}
	c.RegisterUser(&server.User{Username: p.Name, Permissions: Permissions(p)})
	return true
}

// resolve finds the principal a connect names: a token (auth_token), or a
// user name with the token as password (the name must match).
func (a *Authenticator) resolve(opts *server.ClientOpts) (api.Principal, bool) {
	switch {
	case opts.Token != "" && opts.Username == "" && opts.Password == "":
		return a.principals.ByToken(opts.Token)
	case opts.Token == "" && opts.Username != "" && opts.Password != "":
		p, ok := a.principals.ByToken(opts.Password)
		if !ok || subtle.ConstantTimeCompare([]byte(p.Name), []byte(opts.Username)) != 1 {
			return api.Principal{}, false
		}
		return p, true
	}
	return api.Principal{}, false
}

func remote(c server.ClientAuthentication) string {
	if addr := c.RemoteAddress(); addr != nil {
		return addr.String()
	}
	return ""
}
