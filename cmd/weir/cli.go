package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
)

// The producer and operator commands talk to a running weir over NATS
// request-reply, to the micro service "weir" (cmd/weir/api). They hold no
// state and decide nothing: the service authenticates the token, the domain
// decides, and the reply is printed — as a readable summary, or with --json
// exactly as the service (and the HTTP API) wrote it.

func init() {
	register(command{name: "request", summary: "request a withdrawal (idempotent by --id)", run: runRequest})
	register(command{name: "approve", summary: "approve a withdrawal as the token's principal", run: runApprove})
	register(command{name: "cancel", summary: "cancel a withdrawal that has not been sent", run: runCancel})
	register(command{name: "decline", summary: "decline a withdrawal awaiting approval, with a reason (approver)", run: runDecline})
	register(command{name: "credit", summary: "credit an account (operator; idempotent by --credit-id)", run: runCredit})
	register(command{name: "show", summary: "show a withdrawal's current state", run: runShow})
	register(command{name: "events", summary: "list a withdrawal's events", run: runEvents})
	register(command{name: "balance", summary: "show an account's balances", run: runBalance})
	register(command{name: "policy", summary: "show the approval policy in force, or set a new version", run: runPolicy})
	register(command{name: "queue", summary: "list a work queue: approvals, ready or in-flight", run: runQueue})
}

// Defaults of the client flags.
const (
	defaultNATSURL       = "nats://127.0.0.1:4222"
	defaultClientTimeout = 10 * time.Second
)

// clientOpts are the flags every client command has.
type clientOpts struct {
	natsURL string
	token   string
	timeout time.Duration
	json    bool
	creds   *natsCreds
}

func addClientFlags(fs *flag.FlagSet) *clientOpts {
	o := &clientOpts{}
	fs.StringVar(&o.natsURL, "nats-url", defaultNATSURL, "NATS server of the running weir (comma-separated URLs for a cluster)")
	fs.StringVar(&o.token, "token", "", "bearer token of the principal acting (sent as header Authorization: Bearer <token>; also the NATS login on weir's embedded server)")
	o.creds = addNATSCredFlags(fs)
	fs.DurationVar(&o.timeout, "timeout", defaultClientTimeout, "how long to wait for the connection and the reply")
	fs.BoolVar(&o.json, "json", false, "print the service's JSON reply exactly (the HTTP API's JSON)")
	return o
}

// clientFlagSet is newFlagSet with a usage text that explains the command
// before listing its flags.
func clientFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet(name, synopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: weir %s\n\n%s\n\nFlags (each also read from env WEIR_<FLAG_NAME>, e.g. WEIR_TOKEN):\n", synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterspersed parses flags wherever they are among the arguments
// (Go's flag package stops at the first positional argument, but
// `weir approve ID --json` is as natural as `weir approve --json ID`) and
// returns the positional arguments in order. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // the flag package reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := parseFlags(fs, flags); err != nil {
		return nil, err
	}
	return positional, nil
}

// parseArgs is parseInterspersed, then wantArgs: the flags anywhere, and
// exactly n positional arguments.
func parseArgs(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, wantArgs(fs, pos, n)
}

// wantArgs checks the number of positional arguments.
func wantArgs(fs *flag.FlagSet, got []string, n int) error {
	if len(got) != n {
		if len(got) < n {
			fmt.Fprintf(fs.Output(), "weir %s: missing argument\n\n", fs.Name())
		} else {
			fmt.Fprintf(fs.Output(), "weir %s: unexpected arguments %q\n\n", fs.Name(), got[n:])
		}
		fs.Usage()
		return errUsage
	}
	return nil
}

// dial connects to the running weir as the flags say. It is the one place
// a client command connects: credentials and TLS options go here.
func (o *clientOpts) dial() (*api.Client, error) {
	if o.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	auth, err := o.creds.options(o.token)
	if err != nil {
		return nil, err
	}
	c, err := api.Dial(api.ClientConfig{URL: o.natsURL, Token: o.token, Timeout: o.timeout, Name: "weir-cli", Options: auth})
	return c, loginHint(err)
}

// connect dials NATS as dial does, for a command that needs the bare
// connection (the audit reads the log itself).
func (o *clientOpts) connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	if o.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	auth, err := o.creds.options(o.token)
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name(name), nats.Timeout(o.timeout), nats.MaxReconnects(0)}, auth...)
	nc, err := nats.Connect(o.natsURL, append(opts, extra...)...)
	if err != nil {
		return nil, loginHint(fmt.Errorf("cannot connect to NATS at %s: %w", eventstore.RedactURL(o.natsURL), err))
	}
	return nc, nil
}

// loginHint says what to give when the server refused the login.
func loginHint(err error) error {
	if err != nil && (errors.Is(err, nats.ErrAuthorization) || strings.Contains(err.Error(), "Authorization Violation")) {
		return fmt.Errorf("%w (NATS refused the login: give a principal's --token, or the cluster's --nats-creds, --nats-user/--nats-password or --nats-nkey)", err)
	}
	return err
}

// clientExec makes one call and prints its outcome: --json prints the reply
// body as is (a refusal's error document included); otherwise a refusal is
// one line on stderr, "weir <cmd>: <code>: <message>", and success is
// rendered by human. A refusal exits 1.
func clientExec[T any](ctx context.Context, o *clientOpts, cmd string, stdout, stderr io.Writer,
	call func(context.Context, *api.Client) (api.Reply[T], error), human func(api.Reply[T]) error) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := call(ctx, c)
	var refused *api.Refusal
	switch {
	case errors.As(err, &refused):
		if o.json {
			writeRaw(stdout, refused.Data)
		}
		fmt.Fprintf(stderr, "weir %s: %s\n", cmd, refused)
		return exitError{1}
	case err != nil:
		return err
	case o.json:
		writeRaw(stdout, r.Data)
		return nil
	}
	return human(r)
}

// writeRaw prints a reply body followed by a newline: the same bytes the
// HTTP API sends for the same call.
func writeRaw(w io.Writer, data []byte) {
	_, _ = w.Write(data)
	if len(data) == 0 || data[len(data)-1] != '\n' {
		_, _ = io.WriteString(w, "\n")
	}
}

// ---- request, approve, cancel, show ----

func runRequest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("request", "request --id UUID --account A --to ADDR --amount 12.50 [--asset USDT-TRC20] [flags]",
		"Requests a withdrawal. --id is the client-minted operation id: sending the same request\n"+
			"again with it is safe (the reply says \"idempotent replay\"); the same id with another\n"+
			"request is refused with idempotency_conflict. Needs the requester role.", stderr)
	o := addClientFlags(fs)
	id := fs.String("id", "", "operation id (a UUID you mint; reuse it to retry safely)")
	account := fs.String("account", "", "account to pay from")
	to := fs.String("to", "", "destination address (TRON base58)")
	amount := fs.String("amount", "", "amount as a decimal, e.g. 12.50 (sent as a JSON string)")
	asset := fs.String("asset", "USDT-TRC20", "asset")
	_, err := parseArgs(fs, args, 0)
	if err != nil {
		return err
	}
	var missing []string
	for name, v := range map[string]string{"--id": *id, "--account": *account, "--to": *to, "--amount": *amount} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "weir request: %s required\n\n", strings.Join(slices.Sorted(slices.Values(missing)), ", "))
		fs.Usage()
		return errUsage
	}
	req := api.WithdrawalRequest{OperationID: *id, Account: *account, ToAddress: *to, Amount: *amount, Asset: *asset}
	return exitIfRejected(ctx, o, "request", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.WithdrawalView], error) {
		return c.Request(ctx, req)
	})
}

// ExitRejected is the exit status of a producer command (request,
// approve) whose withdrawal ends rejected: it printed the withdrawal, and
// a script sees that it will not be paid.
const ExitRejected = 3

// exitIfRejected runs a producer command that prints a withdrawal (human
// or --json) and then exits ExitRejected when that withdrawal is rejected.
func exitIfRejected(ctx context.Context, o *clientOpts, cmd string, stdout, stderr io.Writer, call func(context.Context, *api.Client) (api.Reply[aggregate.WithdrawalView], error)) error {
	var got *aggregate.WithdrawalView
	err := clientExec(ctx, o, cmd, stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.WithdrawalView], error) {
		r, err := call(ctx, c)
		if err == nil {
			got = &r.Value
		}
		return r, err
	}, printWithdrawalReply(stdout))
	if err == nil && got != nil && got.State == aggregate.StateRejected {
		fmt.Fprintf(stderr, "weir %s: withdrawal %s is rejected (%s)\n", cmd, got.ID, orDash(got.Reason))
		return exitError{ExitRejected}
	}
	return err
}

func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("approve", "approve ID [flags]",
		"Approves the withdrawal as the token's principal (role approver). The requester cannot\n"+
			"approve; approving twice counts once. Exits 3 when the withdrawal is rejected.", stderr)
	o := addClientFlags(fs)
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	return exitIfRejected(ctx, o, "approve", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.WithdrawalView], error) {
		return c.Approve(ctx, pos[0])
	})
}

func runDecline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("decline", "decline ID --reason R [flags]",
		"Declines a withdrawal awaiting approval (state requested) as the token's principal\n"+
			"(role approver), with the reason given. It ends rejected, reason declined, the decliner\n"+
			"and the reason recorded, its reservation released.", stderr)
	o := addClientFlags(fs)
	reason := fs.String("reason", "", "why it is declined (recorded on the withdrawal)")
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		fmt.Fprint(stderr, "weir decline: --reason required\n\n")
		fs.Usage()
		return errUsage
	}
	return clientExec(ctx, o, "decline", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.WithdrawalView], error) {
		return c.Decline(ctx, pos[0], *reason)
	}, printWithdrawalReply(stdout))
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withdrawalCommand(ctx, "cancel", (*api.Client).Cancel,
		"Cancels the withdrawal (its requester or an operator) while nothing can have been sent:\n"+
			"state requested or approved. It ends rejected, reason cancelled, its reservation released.", args, stdout, stderr)
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withdrawalCommand(ctx, "show", (*api.Client).Withdrawal,
		"Shows the withdrawal's current state: amount, approvals, route, txid, attempt, reason.", args, stdout, stderr)
}

// withdrawalCommand is a command taking one withdrawal id, {"id"} on the wire.
func withdrawalCommand(ctx context.Context, name string, call func(*api.Client, context.Context, string) (api.Reply[aggregate.WithdrawalView], error),
	about string, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet(name, name+" ID [flags]", about, stderr)
	o := addClientFlags(fs)
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	return clientExec(ctx, o, name, stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.WithdrawalView], error) {
		return call(c, ctx, pos[0])
	}, printWithdrawalReply(stdout))
}

func printWithdrawalReply(stdout io.Writer) func(api.Reply[aggregate.WithdrawalView]) error {
	return func(r api.Reply[aggregate.WithdrawalView]) error {
		if r.Replayed {
			fmt.Fprintln(stdout, "(idempotent replay) this operation id was already requested with the same data; its current state:")
		}
		printWithdrawal(stdout, r.Value)
		return nil
	}
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printWithdrawal(out io.Writer, w aggregate.WithdrawalView) {
	row := func(k, v string) { fmt.Fprintf(out, "%-13s %s\n", k, v) }
	row("withdrawal", w.ID)
	state := string(w.State)
	if w.Terminal {
		state += " (terminal)"
	}
	row("state", state)
	row("amount", fmt.Sprintf("%s %s (%s units)", w.Amount, w.Asset, w.AmountUnits))
	row("account", w.Account)
	row("to", w.ToAddress)
	row("requested", "by "+w.RequestedBy+" at "+fmtTime(w.RequestedAt))
	row("reserved", yesNo(w.Reserved))
	row("approvals", fmt.Sprintf("%d of %d required", len(w.Approvals), w.RequiredApprovals))
	for _, r := range w.AppliedRules {
		row("rule applied", r.String())
	}
	if w.WindowSum != nil {
		row("24 h sum", *w.WindowSum+" sent before the request")
	}
	if len(w.Approvals) > 0 {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  BY\tAT\tRULE\tPOLICY VERSION")
		for _, a := range w.Approvals {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", a.By, fmtTime(a.At), a.Rule, a.PolicyVersion)
		}
		tw.Flush()
	}
	route := "-"
	if !w.Route.IsZero() {
		route = string(w.Route.Rail())
		if w.Route.Account() != "" {
			route += " to account " + w.Route.Account()
		}
		if w.Route.Reason() != "" {
			route += " (" + w.Route.Reason() + ")"
		}
	}
	row("route", route)
	row("txid", orDash(w.TxID))
	row("attempt", fmt.Sprint(w.Attempt))
	if len(w.RetiredTxIDs) > 0 {
		row("retired txids", strings.Join(w.RetiredTxIDs, ", "))
	}
	printReceipts(out, w, row)
	row("reason", orDash(w.Reason))
	if w.ResolvedBy != nil {
		row("resolved by", *w.ResolvedBy)
	}
	if w.Detail != nil {
		row("detail", *w.Detail)
	}
	row("version", fmt.Sprint(w.Version))
}

// printReceipts lists the chain's receipts of the withdrawal's envelopes
// and the fee each burnt (a dash where the log predates fees).
func printReceipts(out io.Writer, w aggregate.WithdrawalView, row func(k, v string)) {
	if len(w.Receipts) == 0 {
		return
	}
	row("fee burnt", orDash(w.FeeBurnedTRX)+" TRX")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ATTEMPT\tRESULT\tBLOCK\tFEE TRX\tENERGY\tTXID")
	for _, r := range w.Receipts {
		energy := "-"
		if r.EnergyUsed != nil {
			energy = fmt.Sprint(*r.EnergyUsed)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\n", r.Attempt, r.Result, r.BlockNumber, orDash(r.FeeTRX), energy, r.TxID)
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// ---- events ----

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("events", "events ID [flags]",
		"Lists the withdrawal's events in order: version, time, type, the state after it, and\n"+
			"its key data. `weir audit ID` replays the same events and checks them.", stderr)
	o := addClientFlags(fs)
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	return clientExec(ctx, o, "events", stdout, stderr,
		func(ctx context.Context, c *api.Client) (api.Reply[api.EventsBody], error) {
			return c.Events(ctx, pos[0])
		},
		func(r api.Reply[api.EventsBody]) error {
			tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tAT\tTYPE\tSTATE\tDETAILS")
			for _, e := range r.Value.Events {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Version, e.At.UTC().Format(time.RFC3339Nano), e.Type, e.State, eventSummary(e.Type, e.Data))
			}
			return tw.Flush()
		})
}

// eventSummary picks the key data of an event payload for one table cell.
func eventSummary(typ string, data json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	str := func(v any) string {
		switch v := v.(type) {
		case nil:
			return ""
		case string:
			return v
		case float64:
			return fmt.Sprint(int64(v))
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	sub := func(k string) map[string]any { s, _ := m[k].(map[string]any); return s }
	var parts []string
	add := func(k string, v any) {
		if s := str(v); s != "" && s != "0" {
			parts = append(parts, k+"="+s)
		}
	}
	switch strings.TrimPrefix(typ, "withdrawal.") {
	case "requested":
		add("amount", m["amount"])
		add("to", m["to_address"])
		add("by", m["requested_by"])
		add("rule", m["rule"])
		add("required", m["required_approvals"])
		add("policy_version", m["policy_version"])
	case "approval_recorded", "approved":
		a := sub("approval")
		add("by", a["by"])
		add("rule", a["rule"])
		add("policy_version", a["policy_version"])
		add("required", m["required_approvals"])
	case "approvals_invalidated":
		add("reason", m["reason"])
		add("policy_version", m["policy_version"])
		add("required", m["required_approvals"])
		add("given", m["given"])
	case "rejected", "failed":
		add("reason", m["reason"])
		add("by", m["by"])
		add("txid", m["txid"])
		add("detail", m["detail"])
	case "funds_reserved":
		add("account", m["account"])
		add("amount", m["amount"])
	case "claimed":
		add("worker", m["worker"])
	case "routed":
		r := sub("route")
		add("rail", r["rail"])
		add("account", r["account"])
	case "settled_internally":
		add("account", m["account"])
		add("amount", m["amount"])
		add("policy_version", m["policy_version"])
	case "envelope_built":
		add("attempt", m["attempt"])
		add("txid", sub("envelope")["txid"])
		add("policy_version", m["policy_version"])
	case "signed":
		add("txid", m["txid"])
		add("send", m["send"]) // also the first send's intent
	case "broadcasting", "broadcast_accepted":
		add("txid", m["txid"])
		add("attempt", m["attempt"])
		add("send", m["send"])
		add("result", m["result"])
	case "rebuilt":
		add("attempt", m["attempt"])
		add("retired", m["retired_txid"])
		add("txid", sub("envelope")["txid"])
	case "confirmed":
		add("txid", m["txid"])
		add("block", m["block_number"])
		add("receipt", m["receipt"])
	}
	return strings.Join(parts, " ")
}

// ---- credit, balance ----

func runCredit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "approve" {
		return runCreditApprove(ctx, args[1:], stdout, stderr)
	}
	fs := clientFlagSet("credit", "credit --account A --credit-id X --amount 100 [flags]",
		"Credits an account (role operator). --credit-id makes it idempotent: the same credit\n"+
			"again is a replay; the same id with another amount is idempotency_conflict. A credit\n"+
			"above serve --credit-review-above waits for a second operator: weir credit approve.\n"+
			"A credit that would take the balance past the asset's maximum is refused.", stderr)
	o := addClientFlags(fs)
	account := fs.String("account", "", "account to credit")
	creditID := fs.String("credit-id", "", "your id for this credit (e.g. the deposit's reference)")
	amount := fs.String("amount", "", "amount as a decimal (sent as a JSON string)")
	_, err := parseArgs(fs, args, 0)
	if err != nil {
		return err
	}
	if *account == "" || *creditID == "" || *amount == "" {
		fmt.Fprintln(stderr, "weir credit: --account, --credit-id and --amount are required")
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}
	req := api.CreditRequest{Account: *account, CreditID: *creditID, Amount: *amount}
	return clientExec(ctx, o, "credit", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.CreditView], error) {
		return c.Credit(ctx, req)
	}, func(r api.Reply[api.CreditView]) error {
		if p := r.Value.PendingCredit; p != nil {
			fmt.Fprintf(stdout, "credit %s of %s by %s waits for a second operator (balances unchanged):\n", p.CreditID, p.Amount, p.By)
			fmt.Fprintf(stdout, "  weir credit approve --account %s --credit-id %s\n", r.Value.ID, p.CreditID)
		}
		return printAccountReply(stdout)(api.Reply[aggregate.AccountView]{Value: r.Value.AccountView, Data: r.Data, Replayed: r.Replayed})
	})
}

func runCreditApprove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("credit approve", "credit approve --account A --credit-id X [flags]",
		"Approves a credit waiting for review (role operator, not the one who made it): the\n"+
			"account is credited. Approving it again is a replay.", stderr)
	o := addClientFlags(fs)
	account := fs.String("account", "", "account of the credit")
	creditID := fs.String("credit-id", "", "the credit's id")
	_, err := parseArgs(fs, args, 0)
	if err != nil {
		return err
	}
	if *account == "" || *creditID == "" {
		fmt.Fprintln(stderr, "weir credit approve: --account and --credit-id are required")
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}
	return clientExec(ctx, o, "credit approve", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.AccountView], error) {
		return c.ApproveCredit(ctx, *account, *creditID)
	}, printAccountReply(stdout))
}

func runBalance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("balance", "balance ACCOUNT [flags]",
		"Shows an account's balances: available, reserved (held for withdrawals in progress)\n"+
			"and settled (paid out).", stderr)
	o := addClientFlags(fs)
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	return clientExec(ctx, o, "balance", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[aggregate.AccountView], error) {
		return c.Account(ctx, pos[0])
	}, printAccountReply(stdout))
}

func printAccountReply(stdout io.Writer) func(api.Reply[aggregate.AccountView]) error {
	return func(r api.Reply[aggregate.AccountView]) error {
		a := r.Value
		if r.Replayed {
			fmt.Fprintln(stdout, "(idempotent replay) this credit id was already recorded with the same amount; current balances:")
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "account\t%s\n", a.ID)
		fmt.Fprintf(tw, "available\t%s\n", a.Available)
		fmt.Fprintf(tw, "reserved\t%s\n", a.Reserved)
		fmt.Fprintf(tw, "settled\t%s\n", a.Settled)
		return tw.Flush()
	}
}

// ---- policy ----

func policyUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: weir policy <subcommand> [flags]")
	fmt.Fprintln(w, "\nSubcommands:")
	fmt.Fprintln(w, "  show                 print the approval policy in force and its version")
	fmt.Fprintln(w, "  set --file FILE      propose a new version (operator); FILE as for serve --policy,")
	fmt.Fprintln(w, "                       {\"name\",\"rules\":[{\"name\",\"threshold\",\"approvers\"}]}; - reads stdin.")
	fmt.Fprintln(w, "                       In force once serve --policy-quorum operators approved it (the proposer counts as one)")
	fmt.Fprintln(w, "  approve VERSION      approve the open proposal VERSION (operator, not its proposer)")
	fmt.Fprintln(w, "\nEach takes --nats-url, --token, --timeout and --json (see weir policy show --help).")
}

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		policyUsage(stderr)
		return errUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		policyUsage(stdout)
		return nil
	case "show", "get":
		fs := clientFlagSet("policy show", "policy show [flags]",
			"Prints the approval policy in force: its version and rules. A rule applies to amounts\n"+
				"strictly above its threshold and needs that many distinct approvers (never the requester).", stderr)
		o := addClientFlags(fs)
		_, err := parseArgs(fs, args[1:], 0)
		if err != nil {
			return err
		}
		return clientExec(ctx, o, "policy show", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.PolicyChangeView], error) {
			return c.Policy(ctx)
		}, func(r api.Reply[api.PolicyChangeView]) error {
			if err := printPolicyRules(stdout, r.Value.PolicyView); err != nil {
				return err
			}
			if r.Value.Proposal != nil {
				fmt.Fprintln(stdout)
				return printPolicyChange(stdout)(api.Reply[api.PolicyChangeView]{Value: api.PolicyChangeView{Proposal: r.Value.Proposal, ApprovalsNeeded: r.Value.ApprovalsNeeded}})
			}
			return nil
		})
	case "set":
		fs := clientFlagSet("policy set", "policy set --file FILE [flags]",
			"Proposes a new policy version (role operator). It takes effect once serve --policy-quorum\n"+
				"distinct operators have approved it (the proposer counts as one; see weir policy approve);\n"+
				"with a quorum of 1 it is in force at once. Each step is an event on the policy stream: who,\n"+
				"when, which version. Setting the policy in force again changes nothing. A withdrawal needs\n"+
				"the stricter of the policy at its request and the policy in force: tightening applies to\n"+
				"queued withdrawals, loosening never does.", stderr)
		o := addClientFlags(fs)
		file := fs.String("file", "", "policy JSON file (- for stdin)")
		_, err := parseArgs(fs, args[1:], 0)
		if err != nil {
			return err
		}
		if *file == "" {
			fmt.Fprintln(stderr, "weir policy set: --file is required")
			fmt.Fprintln(stderr)
			fs.Usage()
			return errUsage
		}
		var body []byte
		if *file == "-" {
			body, err = io.ReadAll(io.LimitReader(os.Stdin, api.MaxBodyBytes+1))
		} else {
			body, err = os.ReadFile(*file)
		}
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		return clientExec(ctx, o, "policy set", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.PolicyChangeView], error) {
			return c.SetPolicy(ctx, body)
		}, printPolicyChange(stdout))
	case "approve":
		fs := clientFlagSet("policy approve", "policy approve VERSION [flags]",
			"Approves the open policy proposal VERSION (role operator; its proposer cannot). The\n"+
				"approval that completes the quorum puts it in force; approving twice counts once.", stderr)
		o := addClientFlags(fs)
		pos, err := parseArgs(fs, args[1:], 1)
		if err != nil {
			return err
		}
		version, err := strconv.Atoi(pos[0])
		if err != nil || version < 1 {
			fmt.Fprintf(stderr, "weir policy approve: VERSION must be a positive integer, not %q\n", pos[0])
			return errUsage
		}
		return clientExec(ctx, o, "policy approve", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.PolicyChangeView], error) {
			return c.ApprovePolicy(ctx, version)
		}, printPolicyChange(stdout))
	}
	fmt.Fprintf(stderr, "weir policy: unknown subcommand %q\n\n", args[0])
	policyUsage(stderr)
	return errUsage
}

func printPolicyRules(stdout io.Writer, p api.PolicyView) error {
	fmt.Fprintf(stdout, "policy %q version %d\n", p.Name, p.Version)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RULE\tABOVE\tAPPROVERS")
	for _, rule := range p.Rules {
		fmt.Fprintf(tw, "  %s\t%s\t%d\n", rule.Name, rule.Threshold, rule.Approvers)
	}
	if len(p.Destinations) > 0 {
		fmt.Fprintln(tw, "  DESTINATION RULE\tACCOUNTS\tUNLISTED\tALLOWED")
		for _, d := range p.Destinations {
			unlisted := d.Unlisted
			if d.Unlisted == aggregate.UnlistedExtraApprovers {
				unlisted = fmt.Sprintf("+%d approvers", d.ExtraApprovers)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", d.Name, strings.Join(d.Accounts, ","), unlisted, strings.Join(d.Allow, " "))
		}
	}
	if len(p.Velocity) > 0 {
		fmt.Fprintln(tw, "  VELOCITY TIER (24 h)\tACCOUNTS\tABOVE\tEXTRA APPROVERS")
		for _, v := range p.Velocity {
			accounts := strings.Join(v.Accounts, ",")
			if accounts == "" {
				accounts = "*"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t+%d\n", v.Name, accounts, v.Above, v.ExtraApprovers)
		}
	}
	return tw.Flush()
}

// printPolicyChange prints a policy change: in force, or a proposal and
// who has approved it so far.
func printPolicyChange(stdout io.Writer) func(api.Reply[api.PolicyChangeView]) error {
	return func(r api.Reply[api.PolicyChangeView]) error {
		pr := r.Value.Proposal
		if pr == nil {
			fmt.Fprintf(stdout, "policy version %d in force\n", r.Value.Version)
			return printPolicyRules(stdout, r.Value.PolicyView)
		}
		by := make([]string, len(pr.Approvals))
		for i, a := range pr.Approvals {
			by[i] = a.By
		}
		fmt.Fprintf(stdout, "policy version %d proposed by %s: %d of %d approvals (%s); not yet in force\n",
			pr.Version, pr.ProposedBy, len(pr.Approvals), r.Value.ApprovalsNeeded, strings.Join(by, ", "))
		fmt.Fprintf(stdout, "another operator approves it with: weir policy approve %d\n", pr.Version)
		return printPolicyRules(stdout, pr.PolicyView)
	}
}

// ---- queues ----

func runQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("queue", "queue approvals|ready|in-flight [flags]",
		"Lists a work queue: approvals (requested, waiting for approvers), ready (approved and\n"+
			"reserved, waiting for a worker) or in-flight (signing … broadcast).", stderr)
	o := addClientFlags(fs)
	var page api.Page
	fs.IntVar(&page.Limit, "limit", api.DefaultPageLimit, fmt.Sprintf("items per page (at most %d)", api.MaxPageLimit))
	fs.StringVar(&page.Cursor, "cursor", "", "where the page starts: the cursor the page before printed")
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	if _, ok := api.QueueSubjects[pos[0]]; !ok {
		fmt.Fprintf(stderr, "weir queue: unknown queue %q (approvals, ready, in-flight)\n\n", pos[0])
		fs.Usage()
		return errUsage
	}
	return clientExec(ctx, o, "queue", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.ItemsBody], error) {
		return c.Queue(ctx, pos[0], page)
	}, func(r api.Reply[api.ItemsBody]) error {
		doc := r.Value
		now := time.Now()
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		head := "ID\tSTATE\tAMOUNT\tACCOUNT\tTO\tREQUESTER\tAGE\tAPPROVALS\tTXID"
		if pos[0] == "in-flight" {
			head += "\tAMBIGUOUS"
		}
		fmt.Fprintln(tw, head)
		for _, w := range doc.Items {
			// Age: waiting for approvals since the request, ready since the
			// approval, in flight since it entered signing.
			since := w.RequestedAt
			if w.ApprovedAt != nil && pos[0] == "ready" {
				since = *w.ApprovedAt
			}
			age := now.Sub(since)
			if w.InFlight != nil {
				age = time.Duration(w.InFlight.AgeSeconds * float64(time.Second))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s", w.ID, w.State, w.Amount, w.Account, w.ToAddress,
				w.RequestedBy, fmtAge(age), len(w.Approvals), w.RequiredApprovals, orDash(w.TxID))
			if pos[0] == "in-flight" {
				amb := "no"
				if w.InFlight != nil && w.InFlight.Ambiguous {
					amb = "YES"
				}
				fmt.Fprintf(tw, "\t%s", amb)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d item(s)\n", len(doc.Items))
		if doc.NextCursor != nil {
			fmt.Fprintf(stdout, "more: weir queue %s --cursor %s\n", pos[0], *doc.NextCursor)
		}
		return nil
	})
}

// fmtAge is a duration rounded for a table: 45s, 12m3s, 5h2m, 3d4h.
func fmtAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := int(d / (24 * time.Hour))
	return fmt.Sprintf("%dd%dh", days, int((d-time.Duration(days)*24*time.Hour)/time.Hour))
}
