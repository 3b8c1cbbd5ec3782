package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/sagas"
)

// Queues is what the read models offer the API: the three work queues.
// The projections package satisfies it; a nil Queues serves empty lists.
type Queues interface {
	// PendingApprovals: requested withdrawals waiting for approvals.
	PendingApprovals() []aggregate.Withdrawal
	// Ready: approved and reserved, not yet claimed, by approval time.
	Ready(now time.Time) []aggregate.Withdrawal
	// InFlight: signing … broadcast, with age, lease and ambiguity.
	InFlight(now time.Time) []projections.InFlightItem
}

// result is a successful command's reply, the same on both transports.
type result struct {
	created  bool // HTTP 201 (else 200)
	accepted bool // HTTP 202: recorded, not yet in effect (a policy proposal)
	replayed bool // Idempotent-Replayed: true
	body     any
}

// ops are the commands and queries both transports expose. Each takes the
// authenticated, authorized principal and already-extracted inputs, decodes
// the body strictly, calls the application layer and shapes the reply. No
// business rule lives here.
type ops struct {
	intake  *sagas.Intake
	queues  Queues
	history History
	wallet  Wallet
	now     func() time.Time
}

// Command names: the "command" label of the latency histogram and the
// keys of commandRoles (most NATS subjects are weir.cmd.<name>).
const (
	cmdRequest = "withdrawal.request"
	cmdGet     = "withdrawal.get"
	cmdEvents  = "withdrawal.events"
	cmdApprove = "withdrawal.approve"
	cmdCancel  = "withdrawal.cancel"
	// cmdDecline is an approver's refusal of a withdrawal awaiting approval.
	cmdDecline = "withdrawal.decline"
	// cmdList is the withdrawal history (filters, pages).
	cmdList = "withdrawal.list"
	// cmdStatement is an account's statement.
	cmdStatement = "account.statement"
	cmdCredit    = "account.credit"
	// cmdCreditApprove is a second operator's approval of a reviewed credit.
	cmdCreditApprove = "account.credit.approve"
	cmdAccount       = "account.get"
	cmdPolicyGet     = "policy.get"
	cmdPolicySet     = "policy.set"
	// cmdPolicyApprove approves an open policy proposal.
	cmdPolicyApprove = "policy.approve"
	cmdQueue         = "queue"
	// cmdWallet is the hot wallet's balances and whether sending is paused.
	cmdWallet = "wallet.get"
	cmdHealth = "healthz"
)

// readCommands change nothing; their requests are logged at debug.
var readCommands = map[string]bool{
	cmdGet: true, cmdEvents: true, cmdAccount: true, cmdPolicyGet: true, cmdQueue: true,
	cmdList: true, cmdStatement: true, cmdHealth: true, cmdWallet: true,
}

// commandRoles is the role each write needs, checked by both transports
// before the body is read. Reads need any authenticated principal; cancel
// is judged by the application layer (its requester or an operator).
var commandRoles = map[string]Role{
	cmdRequest:       RoleRequester,
	cmdApprove:       RoleApprover,
	cmdDecline:       RoleApprover,
	cmdCredit:        RoleOperator,
	cmdCreditApprove: RoleOperator,
	cmdPolicySet:     RoleOperator,
	// approving a policy proposal is an operator's act, not an approver's.
	cmdPolicyApprove: RoleOperator,
	// webhooks, reads included: URLs and deliveries span every account.
	cmdWebhookCreate:     RoleOperator,
	cmdWebhookList:       RoleOperator,
	cmdWebhookDelete:     RoleOperator,
	cmdWebhookDeliveries: RoleOperator,
}

// authorize checks the role command needs.
func authorize(p Principal, command string) error {
	r, ok := commandRoles[command]
	if ok && !p.Has(r) {
		return apiError(CodeForbidden, "", fmt.Sprintf("%s does not hold the %s role", p.Name, r))
	}
	return nil
}

// mayAct refuses (403) a principal scoped to other accounts.
func mayAct(p Principal, account string) error {
	if !p.MayAct(account) {
		return apiError(CodeForbidden, "account", fmt.Sprintf("%s may not act on or read account %q", p.Name, account))
	}
	return nil
}

// scopedWithdrawal loads a withdrawal for p and refuses (403) one on an
// account p is not scoped to. Unscoped principals skip the extra read.
func (o *ops) scopedWithdrawal(ctx context.Context, p Principal, id string) error {
	if !p.Scoped() {
		return nil
	}
	w, err := o.intake.Withdrawal(ctx, id)
	if err != nil {
		return err
	}
	return mayAct(p, w.Account)
}

// requestBody is POST /v1/withdrawals and weir.cmd.withdrawal.request.
type requestBody struct {
	OperationID string          `json:"operation_id"`
	Account     string          `json:"account"`
	ToAddress   string          `json:"to_address"`
	Amount      json.RawMessage `json:"amount"`
	Asset       string          `json:"asset"`
}

func (o *ops) request(ctx context.Context, p Principal, body []byte) (result, error) {
	var in requestBody
	if err := decodeStrict(body, &in); err != nil {
		return result{}, err
	}
	if err := mayAct(p, in.Account); err != nil {
		return result{}, err
	}
	w, replayed, err := o.intake.Request(ctx, sagas.RequestInput{
		OperationID: in.OperationID, Account: in.Account, ToAddress: in.ToAddress,
		Amount: in.Amount, Asset: in.Asset, By: p.Name,
	})
	if err != nil {
		return result{}, err
	}
	return result{created: !replayed, replayed: replayed, body: w.View()}, nil
}

func (o *ops) withdrawal(ctx context.Context, p Principal, id string) (result, error) {
	w, err := o.intake.Withdrawal(ctx, id)
	if err != nil {
		return result{}, err
	}
	if err := mayAct(p, w.Account); err != nil {
		return result{}, err
	}
	return result{body: w.View()}, nil
}

// EventsBody is GET /v1/withdrawals/{id}/events.
type EventsBody struct {
	Events []sagas.EventView `json:"events"`
}

func (o *ops) events(ctx context.Context, p Principal, id string) (result, error) {
	if err := o.scopedWithdrawal(ctx, p, id); err != nil {
		return result{}, err
	}
	evs, err := o.intake.Events(ctx, id)
	if err != nil {
		return result{}, err
	}
	if evs == nil {
		evs = []sagas.EventView{}
	}
	return result{body: EventsBody{Events: evs}}, nil
}

func (o *ops) approve(ctx context.Context, p Principal, id string) (result, error) {
	if err := o.scopedWithdrawal(ctx, p, id); err != nil {
		return result{}, err
	}
	w, err := o.intake.Approve(ctx, id, p.Name)
	if err != nil {
		return result{}, err
	}
	return result{body: w.View()}, nil
}

// cancel is open to any principal: the application layer lets the
// withdrawal's requester or an operator through and refuses others (403).
func (o *ops) cancel(ctx context.Context, p Principal, id string) (result, error) {
	if err := o.scopedWithdrawal(ctx, p, id); err != nil {
		return result{}, err
	}
	w, err := o.intake.Cancel(ctx, id, p.Name, p.Has(RoleOperator))
	if err != nil {
		return result{}, err
	}
	return result{body: w.View()}, nil
}

// declineBody is POST /v1/withdrawals/{id}/decline (id from the path; an
// "id" member, if sent, must name the same withdrawal) and
// weir.cmd.withdrawal.decline {"id","reason"}.
type declineBody struct {
	ID     *string `json:"id"`
	Reason string  `json:"reason"`
}

// decline: pathID is the withdrawal of the HTTP path, "" on NATS.
func (o *ops) decline(ctx context.Context, p Principal, pathID string, body []byte) (result, error) {
	var in declineBody
	if err := decodeStrict(body, &in); err != nil {
		return result{}, err
	}
	id := pathID
	switch {
	case in.ID != nil && pathID != "" && *in.ID != pathID:
		return result{}, apiError(aggregate.CodeInvalidCommand, "id", "the body names another withdrawal than the path")
	case in.ID != nil:
		id = *in.ID
	}
	if err := o.scopedWithdrawal(ctx, p, id); err != nil {
		return result{}, err
	}
	w, err := o.intake.Decline(ctx, id, p.Name, in.Reason)
	if err != nil {
		return result{}, err
	}
	return result{body: w.View()}, nil
}

// creditBody is POST /v1/accounts/{id}/credits (account from the path; an
// "account" member, if sent, must name the same account) and
// weir.cmd.account.credit (account in the body).
type creditBody struct {
	Account  *string         `json:"account"`
	CreditID string          `json:"credit_id"`
	Amount   json.RawMessage `json:"amount"`
}

// credit: pathAccount is the account of the HTTP path, "" on NATS.
func (o *ops) credit(ctx context.Context, p Principal, pathAccount string, body []byte) (result, error) {
	var in creditBody
	if err := decodeStrict(body, &in); err != nil {
		return result{}, err
	}
	account := pathAccount
	switch {
	case in.Account != nil && pathAccount != "" && *in.Account != pathAccount:
		return result{}, apiError(aggregate.CodeInvalidAccount, "account", "the body names another account than the path")
	case in.Account != nil:
		account = *in.Account
	}
	if err := mayAct(p, account); err != nil {
		return result{}, err
	}
	v, pending, replayed, err := o.intake.CreditWithReview(ctx, sagas.CreditInput{Account: account, CreditID: in.CreditID, Amount: in.Amount, By: p.Name})
	if err != nil {
		return result{}, err
	}
	if pending != nil {
		// Above --credit-review-above: recorded, waiting for a second operator.
		body := CreditView{AccountView: v, PendingCredit: &PendingCreditView{
			CreditID: pending.CreditID, Amount: pending.Amount.String(), By: pending.By, At: pending.At.UTC(),
		}}
		return result{accepted: true, replayed: replayed, body: body}, nil
	}
	return result{created: !replayed, replayed: replayed, body: v}, nil
}

// approveCredit is POST /v1/accounts/{id}/credits/{credit_id}/approve and
// weir.cmd.account.credit.approve {"account","credit_id"}: a second
// operator credits a credit waiting for review (201; again: 200 replayed).
func (o *ops) approveCredit(ctx context.Context, p Principal, account, creditID string) (result, error) {
	if err := mayAct(p, account); err != nil {
		return result{}, err
	}
	v, replayed, err := o.intake.ApproveCredit(ctx, account, creditID, p.Name)
	if err != nil {
		return result{}, err
	}
	return result{created: !replayed, replayed: replayed, body: v}, nil
}

// CreditView is the reply of a credit: the account's balances and, when
// the credit waits for a second operator (202), the pending credit.
type CreditView struct {
	aggregate.AccountView
	PendingCredit *PendingCreditView `json:"pending_credit,omitempty"`
}

// PendingCreditView is a credit waiting for a second operator.
type PendingCreditView struct {
	CreditID string    `json:"credit_id"`
	Amount   string    `json:"amount"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// creditApproveBody is weir.cmd.account.credit.approve's body.
type creditApproveBody struct {
	Account  string `json:"account"`
	CreditID string `json:"credit_id"`
}

func (o *ops) account(ctx context.Context, p Principal, id string) (result, error) {
	if err := mayAct(p, id); err != nil {
		return result{}, err
	}
	v, err := o.intake.Account(ctx, id)
	if err != nil {
		return result{}, err
	}
	return result{body: v}, nil
}

// policy is the policy in force and, when one is open, the proposal
// waiting for its quorum ("proposal", "approvals_needed"; absent otherwise).
func (o *ops) policy(ctx context.Context, _ Principal) (result, error) {
	pol, err := o.intake.Policy(ctx)
	if err != nil {
		return result{}, err
	}
	v := PolicyChangeView{PolicyView: policyView(pol)}
	pr, need, err := o.intake.PolicyProposal(ctx)
	if err != nil {
		return result{}, err
	}
	if pr != nil {
		v.Proposal, v.ApprovalsNeeded = proposalView(pr), need
	}
	return result{body: v}, nil
}

// setPolicy: a body that is not JSON at all is 400 malformed_json; a JSON
// document that is not a valid policy (unknown members included) is 422
// invalid_policy, as the --policy file is judged.
func (o *ops) setPolicy(ctx context.Context, p Principal, body []byte) (result, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		return result{}, apiError(CodeMalformedJSON, "", "the body must be one JSON policy document")
	}
	if trimmed[0] != '{' {
		return result{}, apiError(CodeMalformedJSON, "", "the body must be a JSON object")
	}
	// The policy document has PolicyView's member names.
	if err := checkKeys(trimmed, jsonNames(reflect.TypeFor[PolicyView]())); err != nil {
		return result{}, err
	}
	pol, err := aggregate.ParsePolicyJSON(trimmed)
	if err != nil {
		return result{}, err
	}
	ch, err := o.intake.ProposePolicy(ctx, pol, p.Name)
	if err != nil {
		return result{}, err
	}
	return policyChangeResult(ch), nil
}

// approvePolicy is POST /v1/policy/proposals/{version}/approve and
// weir.cmd.policy.approve {"version"}: 200 with the policy once the
// proposal is in force, 202 with the proposal while it needs more.
func (o *ops) approvePolicy(ctx context.Context, p Principal, version string) (result, error) {
	v, err := strconv.Atoi(version)
	if err != nil || v < 1 || strconv.Itoa(v) != version {
		return result{}, apiError(CodeNotFound, "version", fmt.Sprintf("no policy proposal %q", version))
	}
	ch, err := o.intake.ApprovePolicy(ctx, v, p.Name)
	if err != nil {
		return result{}, err
	}
	return policyChangeResult(ch), nil
}

// policyChangeResult: a change in force is 200 with the policy; a proposal
// waiting for its quorum is 202 with PolicyProposalBody.
func policyChangeResult(ch sagas.PolicyChange) result {
	if ch.Proposal == nil {
		return result{body: policyView(ch.InForce)}
	}
	return result{accepted: true, body: PolicyProposalBody{Proposal: *proposalView(ch.Proposal), ApprovalsNeeded: ch.ApprovalsNeeded}}
}

func proposalView(pr *aggregate.PolicyProposal) *PolicyProposalView {
	v := &PolicyProposalView{PolicyView: policyView(pr.Policy), ProposedBy: pr.ProposedBy, Approvals: make([]PolicyApprovalView, len(pr.Approvals))}
	for i, a := range pr.Approvals {
		v.Approvals[i] = PolicyApprovalView{By: a.By, At: a.At.UTC()}
	}
	return v
}

// PolicyProposalBody is the 202 reply of PUT /v1/policy and of an approval
// that does not yet complete the quorum: {"proposal":{"version","name",
// "rules","proposed_by","approvals":[{"by","at"}]},"approvals_needed":N}.
// The proposer is the first approval.
type PolicyProposalBody struct {
	Proposal        PolicyProposalView `json:"proposal"`
	ApprovalsNeeded int                `json:"approvals_needed"`
}

// PolicyProposalView is an open policy proposal.
type PolicyProposalView struct {
	PolicyView
	ProposedBy string               `json:"proposed_by"`
	Approvals  []PolicyApprovalView `json:"approvals"`
}

// PolicyApprovalView is one operator's approval of a proposal.
type PolicyApprovalView struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// PolicyChangeView decodes either reply of a policy change: the policy in
// force (200: Version, Name, Rules) or the proposal waiting for its quorum
// (202: Proposal and ApprovalsNeeded set). GET /v1/policy answers it with
// both: the policy in force and the open proposal, if any.
type PolicyChangeView struct {
	PolicyView
	Proposal        *PolicyProposalView `json:"proposal,omitempty"`
	ApprovalsNeeded int                 `json:"approvals_needed,omitempty"`
}

// PolicyView is the policy as GET/PUT /v1/policy show it:
// {"version","name","rules":[{"name","threshold","approvers"}]}, threshold
// a decimal string.
//
// Destinations and Velocity (absent when the policy has none) are the
// per-account destination rules and velocity tiers, as in the document.
type PolicyView struct {
	Version      int                         `json:"version"`
	Name         string                      `json:"name"`
	Rules        []PolicyRuleView            `json:"rules"`
	Destinations []aggregate.DestinationRule `json:"destinations,omitempty"`
	Velocity     []aggregate.VelocityTier    `json:"velocity,omitempty"`
}

// PolicyRuleView is one rule of PolicyView.
type PolicyRuleView struct {
	Name      string `json:"name"`
	Threshold string `json:"threshold"`
	Approvers int    `json:"approvers"`
}

func policyView(p aggregate.Policy) PolicyView {
	v := PolicyView{Version: p.Version, Name: p.Name, Rules: make([]PolicyRuleView, len(p.Rules)), Destinations: p.Destinations, Velocity: p.Velocity}
	for i, r := range p.Rules {
		v.Rules[i] = PolicyRuleView{Name: r.Name, Threshold: r.Threshold.String(), Approvers: r.Approvers}
	}
	return v
}

// ItemsBody is one page of a queue: {"items":[withdrawal...],
// "next_cursor":"…"|null}, items never null; next_cursor is null on the
// last page.
type ItemsBody struct {
	Items      []QueueItem `json:"items"`
	NextCursor *string     `json:"next_cursor"`
}

// QueueItem is a withdrawal as everywhere else, plus, in the in-flight
// queue, what an operator needs to judge it (an addition to the contract).
type QueueItem struct {
	aggregate.WithdrawalView
	InFlight *InFlightView `json:"in_flight,omitempty"`
	// Rule and PolicyVersion are the policy rule that bound the
	// withdrawal at its request (the console shows them; not in the JSON).
	Rule          string `json:"-"`
	PolicyVersion int    `json:"-"`
}

// InFlightView says how long a withdrawal has been in flight, who drives
// it, and whether the log alone can tell what happened on chain.
type InFlightView struct {
	Since              time.Time  `json:"since"`
	AgeSeconds         float64    `json:"age_seconds"`
	EnvelopeAgeSeconds float64    `json:"envelope_age_seconds"`
	Sends              int        `json:"sends"`
	ClaimedBy          *string    `json:"claimed_by"`
	LeaseUntil         *time.Time `json:"lease_until"`
	// Unacknowledged: a send is recorded with no acceptance after it.
	Unacknowledged bool `json:"unacknowledged"`
	// LeaseLapsed: no worker holds a live lease on it.
	LeaseLapsed bool `json:"lease_lapsed"`
	// Ambiguous: either of the above — reconciliation by txid is due.
	Ambiguous bool `json:"ambiguous"`
}

func inFlightView(it projections.InFlightItem) *InFlightView {
	v := &InFlightView{
		Since: it.Since.UTC(), AgeSeconds: it.Age.Seconds(), EnvelopeAgeSeconds: it.EnvelopeAge.Seconds(),
		Sends: it.Sends, Unacknowledged: it.Unacknowledged, LeaseLapsed: it.LeaseLapsed, Ambiguous: it.Ambiguous,
	}
	if it.ClaimedBy != "" {
		by, until := it.ClaimedBy, it.LeaseUntil.UTC()
		v.ClaimedBy, v.LeaseUntil = &by, &until
	}
	return v
}

// Paging of the queues.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// queue answers one page of a queue. Each queue is ordered by a time (the
// request, the approval, entering the in-flight state) then by id; the
// cursor is the last item's (time, id), so a page starts after it whatever
// left or joined the queue meanwhile.
func (o *ops) queue(p Principal, name string, page Page) (result, error) {
	limit := page.Limit
	switch {
	case limit == 0:
		limit = DefaultPageLimit
	case limit < 0 || limit > MaxPageLimit:
		return result{}, apiError(aggregate.CodeInvalidCommand, "limit", fmt.Sprintf("limit must be 1 to %d", MaxPageLimit))
	}
	var after *pageKey
	if page.Cursor != "" {
		k, err := decodeCursor(page.Cursor)
		if err != nil {
			return result{}, err
		}
		after = &k
	}
	type keyed struct {
		key  pageKey
		item QueueItem
	}
	var all []keyed
	if o.queues != nil {
		switch name {
		case "approvals":
			for _, w := range o.queues.PendingApprovals() {
				all = append(all, keyed{pageKey{w.RequestedAt, w.ID}, QueueItem{WithdrawalView: w.View(), Rule: w.Rule, PolicyVersion: w.PolicyVersion}})
			}
		case "ready":
			for _, w := range o.queues.Ready(o.now()) {
				all = append(all, keyed{pageKey{w.ApprovedAt, w.ID}, QueueItem{WithdrawalView: w.View(), Rule: w.Rule, PolicyVersion: w.PolicyVersion}})
			}
		case "in-flight":
			for _, it := range o.queues.InFlight(o.now()) {
				all = append(all, keyed{pageKey{it.Since, it.ID}, QueueItem{WithdrawalView: it.Withdrawal.View(), InFlight: inFlightView(it), Rule: it.Withdrawal.Rule, PolicyVersion: it.Withdrawal.PolicyVersion}})
			}
		default:
			return result{}, apiError(CodeNotFound, "", fmt.Sprintf("no queue %q", name))
		}
	}
	if p.Scoped() { // a scoped principal sees its accounts' items only
		all = slices.DeleteFunc(all, func(k keyed) bool { return !p.MayAct(k.item.Account) })
	}
	body := ItemsBody{Items: []QueueItem{}}
	for i, k := range all {
		if after != nil && k.key.compare(*after) <= 0 {
			continue
		}
		if len(body.Items) == limit {
			next := all[i-1].key.encode()
			body.NextCursor = &next
			break
		}
		body.Items = append(body.Items, k.item)
	}
	return result{body: body}, nil
}

// pageKey is a queue item's place in its order.
type pageKey struct {
	at time.Time
	id string
}

func (k pageKey) compare(o pageKey) int {
	if c := k.at.Compare(o.at); c != 0 {
		return c
	}
	return strings.Compare(k.id, o.id)
}

func (k pageKey) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(k.at.UTC().Format(time.RFC3339Nano) + " " + k.id))
}

func decodeCursor(s string) (pageKey, error) {
	bad := apiError(aggregate.CodeInvalidCommand, "cursor", "not a cursor this API gave out")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return pageKey{}, bad
	}
	at, id, ok := strings.Cut(string(b), " ")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil {
		return pageKey{}, bad
	}
	return pageKey{t, id}, nil
}

// pageQuery reads ?limit=N&cursor=C.
func pageQuery(r *http.Request) (Page, error) {
	q := r.URL.Query()
	p := Page{Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return Page{}, apiError(aggregate.CodeInvalidCommand, "limit", fmt.Sprintf("limit must be 1 to %d", MaxPageLimit))
		}
		p.Limit = n
	}
	return p, nil
}

// idBody is the body of the NATS commands on one withdrawal or account.
type idBody struct {
	ID string `json:"id"`
}

func decodeID(body []byte) (string, error) {
	var in idBody
	if err := decodeStrict(body, &in); err != nil {
		return "", err
	}
	return in.ID, nil
}

// Page asks a queue for one page: at most Limit items (DefaultPageLimit
// when zero) after Cursor (the next_cursor of the page before; "" is the
// first page).
type Page struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}
