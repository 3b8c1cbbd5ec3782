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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/cmd/weir/api"
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
}

func addClientFlags(fs *flag.FlagSet) *clientOpts {
	o := &clientOpts{}
	fs.StringVar(&o.natsURL, "nats-url", defaultNATSURL, "NATS server of the running weir (comma-separated URLs for a cluster)")
	fs.StringVar(&o.token, "token", "", "bearer token of the principal acting (sent as header Authorization: Bearer <token>)")
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

// serviceReply is one reply of the weir service.
type serviceReply struct {
	data     []byte
	replayed bool
	status   string           // micro error code (the HTTP status), "" on success
	errBody  *api.ErrorDetail // decoded error document on a refusal
}

// call sends one command and waits for its reply. Transport failures are
// returned as errors worded for a person at a terminal.
func (o *clientOpts) call(ctx context.Context, subject string, body []byte) (serviceReply, error) {
	if o.timeout <= 0 {
		return serviceReply{}, errors.New("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	nc, err := nats.Connect(o.natsURL,
		nats.Name("weir-cli"),
		nats.Timeout(o.timeout),
		nats.MaxReconnects(0),
	)
	if err != nil {
		return serviceReply{}, fmt.Errorf("cannot connect to NATS at %s: %w", o.natsURL, err)
	}
	defer nc.Close()

	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set("Content-Type", "application/json")
	if o.token != "" {
		msg.Header.Set(api.HeaderAuthorization, "Bearer "+o.token)
	}
	m, err := nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return serviceReply{}, fmt.Errorf("no weir service at %s (is `weir serve` running and connected to this NATS?)", o.natsURL)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return serviceReply{}, fmt.Errorf("no reply from the weir service at %s within %s", o.natsURL, o.timeout)
	case err != nil:
		return serviceReply{}, fmt.Errorf("%s: %w", subject, err)
	}
	r := serviceReply{data: m.Data}
	if m.Header != nil {
		r.replayed = m.Header.Get(api.HeaderReplayed) == "true"
		r.status = m.Header.Get(micro.ErrorCodeHeader)
	}
	if r.status != "" {
		var eb api.ErrorBody
		if json.Unmarshal(m.Data, &eb) != nil || eb.Error.Code == "" {
			// Not our error document (e.g. micro's own error): use the headers.
			eb.Error = api.ErrorDetail{Code: m.Header.Get(micro.ErrorHeader), Message: strings.TrimSpace(string(m.Data))}
			if eb.Error.Code == "" {
				eb.Error.Code = "error"
			}
			if eb.Error.Message == "" {
				eb.Error.Message = "status " + r.status
			}
		}
		r.errBody = &eb.Error
	}
	return r, nil
}

// exec sends the command and prints its outcome: --json prints the reply
// body as is (a refusal's error document included); otherwise a refusal is
// one line on stderr, "weir <cmd>: <code>: <message>", and success is
// rendered by human. A refusal exits 1.
func (o *clientOpts) exec(ctx context.Context, cmd, subject string, body []byte, stdout, stderr io.Writer, human func(serviceReply) error) error {
	r, err := o.call(ctx, subject, body)
	if err != nil {
		return err
	}
	if o.json {
		writeRaw(stdout, r.data)
	}
	if r.errBody != nil {
		e := r.errBody
		line := fmt.Sprintf("weir %s: %s: %s", cmd, e.Code, e.Message)
		if e.Field != "" && !strings.Contains(e.Message, e.Field) {
			line += " (field " + e.Field + ")"
		}
		fmt.Fprintln(stderr, line)
		return exitError{1}
	}
	if o.json {
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

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and strings are marshalled here
	}
	return b
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
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0); err != nil {
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
	body := mustJSON(map[string]string{
		"operation_id": *id, "account": *account, "to_address": *to, "amount": *amount, "asset": *asset,
	})
	return o.exec(ctx, "request", api.SubjectWithdrawalRequest, body, stdout, stderr, printWithdrawalReply(stdout))
}

func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withdrawalCommand(ctx, "approve", api.SubjectWithdrawalApprove,
		"Approves the withdrawal as the token's principal (role approver). The requester cannot\n"+
			"approve; approving twice counts once.", args, stdout, stderr)
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withdrawalCommand(ctx, "cancel", api.SubjectWithdrawalCancel,
		"Cancels the withdrawal (its requester or an operator) while nothing can have been sent:\n"+
			"state requested or approved. It ends rejected, reason cancelled, its reservation released.", args, stdout, stderr)
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withdrawalCommand(ctx, "show", api.SubjectWithdrawalGet,
		"Shows the withdrawal's current state: amount, approvals, route, txid, attempt, reason.", args, stdout, stderr)
}

// withdrawalCommand is a command taking one withdrawal id, {"id"} on the wire.
func withdrawalCommand(ctx context.Context, name, subject, about string, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet(name, name+" ID [flags]", about, stderr)
	o := addClientFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1); err != nil {
		return err
	}
	return o.exec(ctx, name, subject, mustJSON(map[string]string{"id": pos[0]}), stdout, stderr, printWithdrawalReply(stdout))
}

// withdrawalJSON is the API's withdrawal document as the CLI reads it.
type withdrawalJSON struct {
	ID                string `json:"id"`
	State             string `json:"state"`
	Version           uint64 `json:"version"`
	Account           string `json:"account"`
	ToAddress         string `json:"to_address"`
	Amount            string `json:"amount"`
	AmountUnits       string `json:"amount_units"`
	Asset             string `json:"asset"`
	RequestedBy       string `json:"requested_by"`
	RequiredApprovals int    `json:"required_approvals"`
	Approvals         []struct {
		By            string    `json:"by"`
		At            time.Time `json:"at"`
		Rule          string    `json:"rule"`
		PolicyVersion int       `json:"policy_version"`
	} `json:"approvals"`
	Route *struct {
		Rail    *string `json:"rail"`
		Account *string `json:"account"`
		Reason  *string `json:"reason"`
	} `json:"route"`
	TxID         *string    `json:"txid"`
	Attempt      int        `json:"attempt"`
	Reason       *string    `json:"reason"`
	Terminal     bool       `json:"terminal"`
	Reserved     *bool      `json:"reserved"`
	RequestedAt  *time.Time `json:"requested_at"`
	ApprovedAt   *time.Time `json:"approved_at"`
	UpdatedAt    *time.Time `json:"updated_at"`
	RetiredTxIDs []string   `json:"retired_txids"`
}

func printWithdrawalReply(stdout io.Writer) func(serviceReply) error {
	return func(r serviceReply) error {
		var w withdrawalJSON
		if err := json.Unmarshal(r.data, &w); err != nil {
			return fmt.Errorf("the service's reply is not a withdrawal: %w", err)
		}
		if r.replayed {
			fmt.Fprintln(stdout, "(idempotent replay) this operation id was already requested with the same data; its current state:")
		}
		printWithdrawal(stdout, w)
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

func printWithdrawal(out io.Writer, w withdrawalJSON) {
	row := func(k, v string) { fmt.Fprintf(out, "%-13s %s\n", k, v) }
	row("withdrawal", w.ID)
	state := w.State
	if w.Terminal {
		state += " (terminal)"
	}
	row("state", state)
	row("amount", fmt.Sprintf("%s %s (%s units)", w.Amount, w.Asset, w.AmountUnits))
	row("account", w.Account)
	row("to", w.ToAddress)
	requested := "by " + w.RequestedBy
	if w.RequestedAt != nil {
		requested += " at " + fmtTime(*w.RequestedAt)
	}
	row("requested", requested)
	if w.Reserved != nil {
		row("reserved", yesNo(*w.Reserved))
	}
	row("approvals", fmt.Sprintf("%d of %d required", len(w.Approvals), w.RequiredApprovals))
	if len(w.Approvals) > 0 {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  BY\tAT\tRULE\tPOLICY VERSION")
		for _, a := range w.Approvals {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", a.By, fmtTime(a.At), a.Rule, a.PolicyVersion)
		}
		tw.Flush()
	}
	route := "-"
	if w.Route != nil && w.Route.Rail != nil && *w.Route.Rail != "" {
		route = *w.Route.Rail
		if w.Route.Account != nil && *w.Route.Account != "" {
			route += " to account " + *w.Route.Account
		}
		if w.Route.Reason != nil && *w.Route.Reason != "" {
			route += " (" + *w.Route.Reason + ")"
		}
	}
	row("route", route)
	row("txid", orDash(w.TxID))
	row("attempt", fmt.Sprint(w.Attempt))
	if len(w.RetiredTxIDs) > 0 {
		row("retired txids", strings.Join(w.RetiredTxIDs, ", "))
	}
	row("reason", orDash(w.Reason))
	row("version", fmt.Sprint(w.Version))
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
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1); err != nil {
		return err
	}
	return o.exec(ctx, "events", api.SubjectWithdrawalEvents, mustJSON(map[string]string{"id": pos[0]}), stdout, stderr,
		func(r serviceReply) error {
			var doc struct {
				Events []struct {
					Version uint64          `json:"version"`
					Type    string          `json:"type"`
					At      time.Time       `json:"at"`
					State   string          `json:"state"`
					Data    json.RawMessage `json:"data"`
				} `json:"events"`
			}
			if err := json.Unmarshal(r.data, &doc); err != nil {
				return fmt.Errorf("the service's reply is not an event list: %w", err)
			}
			tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tAT\tTYPE\tSTATE\tDETAILS")
			for _, e := range doc.Events {
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
	fs := clientFlagSet("credit", "credit --account A --credit-id X --amount 100 [flags]",
		"Credits an account (role operator). --credit-id makes it idempotent: the same credit\n"+
			"again is a replay; the same id with another amount is idempotency_conflict.", stderr)
	o := addClientFlags(fs)
	account := fs.String("account", "", "account to credit")
	creditID := fs.String("credit-id", "", "your id for this credit (e.g. the deposit's reference)")
	amount := fs.String("amount", "", "amount as a decimal (sent as a JSON string)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0); err != nil {
		return err
	}
	if *account == "" || *creditID == "" || *amount == "" {
		fmt.Fprintln(stderr, "weir credit: --account, --credit-id and --amount are required")
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}
	body := mustJSON(map[string]string{"account": *account, "credit_id": *creditID, "amount": *amount})
	return o.exec(ctx, "credit", api.SubjectAccountCredit, body, stdout, stderr, printAccountReply(stdout))
}

func runBalance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("balance", "balance ACCOUNT [flags]",
		"Shows an account's balances: available, reserved (held for withdrawals in progress)\n"+
			"and settled (paid out).", stderr)
	o := addClientFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1); err != nil {
		return err
	}
	return o.exec(ctx, "balance", api.SubjectAccountGet, mustJSON(map[string]string{"id": pos[0]}), stdout, stderr, printAccountReply(stdout))
}

func printAccountReply(stdout io.Writer) func(serviceReply) error {
	return func(r serviceReply) error {
		var a struct {
			ID        string `json:"id"`
			Available string `json:"available"`
			Reserved  string `json:"reserved"`
			Settled   string `json:"settled"`
		}
		if err := json.Unmarshal(r.data, &a); err != nil {
			return fmt.Errorf("the service's reply is not an account: %w", err)
		}
		if r.replayed {
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
	fmt.Fprintln(w, "  set --file FILE      put a new version in force (operator); FILE as for serve --policy,")
	fmt.Fprintln(w, "                       {\"name\",\"rules\":[{\"name\",\"threshold\",\"approvers\"}]}; - reads stdin")
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
		pos, err := parseInterspersed(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 0); err != nil {
			return err
		}
		return o.exec(ctx, "policy show", api.SubjectPolicyGet, []byte("{}"), stdout, stderr, printPolicyReply(stdout, false))
	case "set":
		fs := clientFlagSet("policy set", "policy set --file FILE [flags]",
			"Puts a new policy version in force (role operator). The change is an event on the policy\n"+
				"stream: who, when, which version. Setting the policy in force again changes nothing.\n"+
				"Withdrawals approved under an older version are re-checked before they are sent.", stderr)
		o := addClientFlags(fs)
		file := fs.String("file", "", "policy JSON file (- for stdin)")
		pos, err := parseInterspersed(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 0); err != nil {
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
		return o.exec(ctx, "policy set", api.SubjectPolicySet, body, stdout, stderr, printPolicyReply(stdout, true))
	}
	fmt.Fprintf(stderr, "weir policy: unknown subcommand %q\n\n", args[0])
	policyUsage(stderr)
	return errUsage
}

func printPolicyReply(stdout io.Writer, set bool) func(serviceReply) error {
	return func(r serviceReply) error {
		var p api.PolicyView
		if err := json.Unmarshal(r.data, &p); err != nil {
			return fmt.Errorf("the service's reply is not a policy: %w", err)
		}
		if set {
			fmt.Fprintf(stdout, "policy version %d in force\n", p.Version)
		}
		fmt.Fprintf(stdout, "policy %q version %d\n", p.Name, p.Version)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  RULE\tABOVE\tAPPROVERS")
		for _, rule := range p.Rules {
			fmt.Fprintf(tw, "  %s\t%s\t%d\n", rule.Name, rule.Threshold, rule.Approvers)
		}
		return tw.Flush()
	}
}

// ---- queues ----

func runQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("queue", "queue approvals|ready|in-flight [flags]",
		"Lists a work queue: approvals (requested, waiting for approvers), ready (approved and\n"+
			"reserved, waiting for a worker) or in-flight (signing … broadcast).", stderr)
	o := addClientFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1); err != nil {
		return err
	}
	subjects := map[string]string{
		"approvals": api.SubjectQueueApprovals, "ready": api.SubjectQueueReady, "in-flight": api.SubjectQueueInFlight,
	}
	subject, ok := subjects[pos[0]]
	if !ok {
		fmt.Fprintf(stderr, "weir queue: unknown queue %q (approvals, ready, in-flight)\n\n", pos[0])
		fs.Usage()
		return errUsage
	}
	return o.exec(ctx, "queue", subject, []byte("{}"), stdout, stderr, func(r serviceReply) error {
		var doc struct {
			Items []withdrawalJSON `json:"items"`
		}
		if err := json.Unmarshal(r.data, &doc); err != nil {
			return fmt.Errorf("the service's reply is not a queue: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tAMOUNT\tACCOUNT\tAPPROVALS\tTXID")
		for _, w := range doc.Items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", w.ID, w.State, w.Amount, w.Account, len(w.Approvals), w.RequiredApprovals, orDash(w.TxID))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d item(s)\n", len(doc.Items))
		return nil
	})
}
