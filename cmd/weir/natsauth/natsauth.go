package natsauth

import (
	"crypto/subtle"
	"log/slog"
	"strconv"
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
	// SnapshotBucket is the KV bucket (stream KV_WEIR_SNAPSHOTS) of
	// account snapshots. No principal or auditor has any right on it: a
	// forged snapshot is ignored (its tag under the event key does not
	// verify), but reading one would show any account's balances.
	SnapshotBucket = sagas.SnapshotBucket
)

// WeirDurables are the durable consumers weir itself relies on. No
// principal may create, update, pull from or delete them: a pull steals a
// delivery from the saga, a delete or an update (a new filter) stops it.
var WeirDurables = []string{sagas.LedgerConsumer}

// ProducerPublish is what a principal not scoped to accounts may publish:
// commands, service discovery, the notification stream's info and
// consumer listing, and the rights on consumers of WEIR_NOTIFY under any
// name (NotifyConsumerRules with "*"), so that natscli's durables and
// nats.go's ordered consumers work as on any stream. The names other
// principals own are taken away again by OthersNotifyConsumerDeny.
// apiPrefix is "$JS.API" on the embedded server; docs/nats-server.conf
// gives its producer user exactly ProducerPublish("$JS.WEIR.API") (a test
// compares them).
func ProducerPublish(apiPrefix string) []string {
	return append([]string{
		"weir.cmd.>",
		"$SRV.>",
		apiPrefix + ".STREAM.INFO." + NotifyStream,
		apiPrefix + ".CONSUMER.LIST." + NotifyStream,
		apiPrefix + ".CONSUMER.NAMES." + NotifyStream,
	}, NotifyConsumerRules(apiPrefix, []string{"*"}, nil)...)
}

// OthersNotifyConsumerDeny denies every right on the consumers of
// WEIR_NOTIFY that other principals own (their NotifyConsumerNames): an
// unscoped principal may use any other name, but cannot create, redefine,
// read, pull from, ack on or delete bob's "bob" … "bob_9". Five subjects a
// name: "*" and "*.*" cover every consumer API verb (CREATE, INFO, DELETE,
// MSG.NEXT, DURABLE.CREATE), with or without a filter after the name.
func OthersNotifyConsumerDeny(apiPrefix string, others []string) []string {
	var out []string
	for _, n := range others {
		at := NotifyStream + "." + n
		out = append(out,
			apiPrefix+".CONSUMER.*."+at, apiPrefix+".CONSUMER.*."+at+".>",
			apiPrefix+".CONSUMER.*.*."+at,
			"$JS.ACK."+at+".>", "$JS.FC."+at+".>")
	}
	return out
}

// NotifyConsumerExtra is how many numbered consumer names a principal owns
// on WEIR_NOTIFY besides its own name.
const NotifyConsumerExtra = 9

// NotifyConsumerNames are the consumers on WEIR_NOTIFY that the principal
// called name may create, read, pull from, ack on and delete: name itself
// and name_1 … name_9. NATS permissions match whole subject tokens only,
// and a consumer name is one token of the JetStream API's subjects, so a
// true prefix ("alice-*") cannot be written: the names are listed. A
// numbered name that is another principal's own name (a principal called
// "alice_1") is left out, and a name that cannot be a consumer name (".",
// "*", ">", whitespace, a path separator) owns none. taken reports the
// other principals' names.
func NotifyConsumerNames(name string, taken func(string) bool) []string {
	if name == "" || len(name) > 200 || strings.ContainsAny(name, ".*> \t\r\n/\\") {
		return nil
	}
	names := []string{name}
	for i := 1; i <= NotifyConsumerExtra; i++ {
		n := name + "_" + strconv.Itoa(i)
		if taken == nil || !taken(n) {
			names = append(names, n)
		}
	}
	return names
}

// NotifyConsumerRules are the publish rights on the consumers names of
// WEIR_NOTIFY: create (with or without a filter in the subject), durable
// create, info, next, delete, ack and flow control. apiPrefix is "$JS.API"
// on the embedded server, the imported prefix ("$JS.WEIR.API") for the
// reference config's producers. With filters (a scoped principal) a create
// must carry one of them in its subject, and the creates that carry none
// are not granted. The nameless create ($JS.API.CONSUMER.CREATE.<stream>)
// is never granted: the server takes the consumer's name from its body,
// so it would create or redefine anyone's consumer.
func NotifyConsumerRules(apiPrefix string, names, filters []string) []string {
	var out []string
	api := apiPrefix + ".CONSUMER."
	for _, n := range names {
		at := NotifyStream + "." + n
		if filters == nil {
			out = append(out, api+"CREATE."+at, api+"CREATE."+at+".>", api+"DURABLE.CREATE."+at)
		}
		for _, f := range filters {
			out = append(out, api+"CREATE."+at+"."+f)
		}
		out = append(out, api+"INFO."+at, api+"MSG.NEXT."+at, api+"DELETE."+at,
			"$JS.ACK."+at+".>", "$JS.FC."+at+".>")
	}
	return out
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
// embedded server. consumers are the names it owns on WEIR_NOTIFY
// (NotifyConsumerNames); others are the names the other principals own,
// which it may not touch. A principal scoped to accounts may use only its
// own names (with a filter on its accounts); one that is not may use any
// name but the others'.
func Permissions(p api.Principal, consumers, others []string) *server.Permissions {
	pub := ProducerPublish("$JS.API")
	sub := append([]string(nil), producerSubscribe...)
	deny := OthersNotifyConsumerDeny("$JS.API", others)
	var subDeny []string
	if p.Scoped() {
		pub, sub = scopedProducer(p, consumers)
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
// accounts: notifications (and its consumers on WEIR_NOTIFY, which must
// filter in the create subject) only for its accounts named exactly. A
// glob ("ops-*") cannot be written as a NATS subject rule, so it gets no
// notifications over NATS (webhooks can filter by account). Nor does it
// list the stream's consumers: their filters name other accounts.
func scopedProducer(p api.Principal, consumers []string) (pub, sub []string) {
	pub = []string{"weir.cmd.>", "$SRV.>", "$JS.API.STREAM.INFO." + NotifyStream}
	sub = []string{"_INBOX.>"}
	var filters []string
	for _, acct := range p.Accounts {
		if strings.ContainsAny(acct, "*?[\\") {
			continue
		}
		subj := "weir.notify.withdrawal." + acct + ".>"
		sub = append(sub, subj)
		filters = append(filters, subj)
	}
	if len(filters) > 0 {
		pub = append(pub, NotifyConsumerRules("$JS.API", consumers, filters)...)
	}
	return pub, sub
}

// Authenticator admits principals by token.
type Authenticator struct {
	principals *api.Principals
	// perms are each principal's permissions, by name: the principals
	// are fixed once New has them, and so are their rights.
	perms map[string]*server.Permissions
	log   *slog.Logger
}

// New returns an Authenticator over principals; refusals are logged (who
// claimed to connect and from where, never what they presented).
func New(principals *api.Principals, log *slog.Logger) *Authenticator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	all := principals.All()
	names := map[string]struct{}{}
	for _, p := range all {
		names[p.Name] = struct{}{}
	}
	taken := func(n string) bool { _, ok := names[n]; return ok }
	// Every principal's consumer names, in the principals' order, so that
	// the deny rules built from them come in one order on every start.
	owned := make([][]string, len(all))
	for i, p := range all {
		owned[i] = NotifyConsumerNames(p.Name, taken)
	}
	perms := make(map[string]*server.Permissions, len(all))
	for i, p := range all {
		var others []string
		for j := range all {
			if j != i {
				others = append(others, owned[j]...)
			}
		}
		perms[p.Name] = Permissions(p, owned[i], others)
	}
	return &Authenticator{principals: principals, perms: perms, log: log}
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
	perms, ok := a.perms[p.Name]
	if !ok {
		// Not one of New's principals: nil permissions would allow it
		// everything.
		a.log.Error("NATS connection refused: principal without permissions", "remote", remote(c), "user", p.Name)
		return false
	}
	// The server copies the rules into the connection's own structures
	// (client.setPermissions), so connections can share them.
	c.RegisterUser(&server.User{Username: p.Name, Permissions: perms})
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
