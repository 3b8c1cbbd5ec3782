package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
)

// consolePageLimit is how many rows a console table shows per page.
const consolePageLimit = 50

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: Path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// loginPage shows the token form with a fresh double-submitted CSRF token.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(SessionCookie); err == nil {
		if ss, _ := c.sessions.get(ck.Value); ss != nil {
			http.Redirect(w, r, "/console/approvals", http.StatusSeeOther)
			return
		}
	}
	c.showLogin(w, r, http.StatusOK, "")
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, problem string) {
	tok := randomToken()
	c.setCookie(w, r, LoginCookie, tok, 3600)
	q := r.URL.Query()
	next := localPath(r.FormValue("next"), "")
	if problem == "" {
		switch {
		case q.Get("expired") != "":
			problem = "Your session has expired; log in again."
		case q.Get("out") != "":
			problem = "You are logged out."
		}
	}
	c.render(w, r, nil, status, "login", "Log in", map[string]any{"LoginCSRF": tok, "Next": next, "Problem": problem})
}

// login checks the double-submitted token, then the principal's token. A
// wrong token draws on the client address's failed-authentication budget,
// as a wrong bearer token does on the API.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "This form was sent from another site; nothing was done.", "csrf")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, nil, http.StatusBadRequest, "The form could not be read.", "")
		return
	}
	ck, err := r.Cookie(LoginCookie)
	if err != nil || !sameToken(r.PostForm.Get(CSRFField), ck.Value) {
		c.fail(w, r, nil, http.StatusForbidden, "The login form's security token is missing or stale; reload the login page.", "csrf")
		return
	}
	p, ok := c.app.Authenticate(strings.TrimSpace(r.PostForm.Get("token")))
	if !ok {
		if err := c.app.AllowFailedAuth(r); err != nil {
			c.refuse(w, r, nil, err)
			return
		}
		c.showLogin(w, r, http.StatusUnauthorized, "That token belongs to no principal.")
		return
	}
	infoOf(r).principal = p.Name
	if err := c.app.Allow(p); err != nil {
		c.refuse(w, r, nil, err)
		return
	}
	id, _, err := c.sessions.create(p)
	if err != nil {
		w.Header().Set("Retry-After", "60")
		c.fail(w, r, nil, http.StatusServiceUnavailable, "Too many sessions are open; try again later.", "unavailable")
		return
	}
	c.setCookie(w, r, SessionCookie, id, 0)
	c.setCookie(w, r, LoginCookie, "", -1)
	http.Redirect(w, r, localPath(r.PostForm.Get("next"), "/console/approvals"), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, ss *session) {
	c.sessions.delete(ss)
	c.setCookie(w, r, SessionCookie, "", -1)
	http.Redirect(w, r, "/console/login?out=1", http.StatusSeeOther)
}

// approvalRow is one withdrawal of the approvals queue and what the
// logged-in principal may do with it.
type approvalRow struct {
	api.QueueItem
	Mine       bool // requested by the principal: no approve button
	ApprovedBy bool // the principal has approved it already
	CanApprove bool
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, ss *session) {
	body, err := c.app.Queue(r.Context(), ss.p, "approvals", api.Page{Limit: consolePageLimit, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	rows := make([]approvalRow, len(body.Items))
	for i, it := range body.Items {
		row := approvalRow{QueueItem: it, Mine: it.RequestedBy == ss.p.Name}
		row.ApprovedBy = slices.ContainsFunc(it.Approvals, func(a aggregate.Approval) bool { return a.By == ss.p.Name })
		row.CanApprove = ss.p.Has(api.RoleApprover) && !row.Mine && !row.ApprovedBy
		rows[i] = row
	}
	c.renderLive(w, r, ss, http.StatusOK, "approvals", "Approvals", "all", map[string]any{"Rows": rows, "Next": body.NextCursor})
}

func (c *Console) withdrawalsPage(w http.ResponseWriter, r *http.Request, ss *session) {
	q := r.URL.Query()
	lq := api.ListQuery{State: q.Get("state"), Account: q.Get("account"), Limit: consolePageLimit, Cursor: q.Get("cursor")}
	body, err := c.app.List(r.Context(), ss.p, lq)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	c.renderLive(w, r, ss, http.StatusOK, "withdrawals", "Withdrawals", "all", map[string]any{
		"Items": body.Withdrawals, "Next": body.NextCursor, "Query": lq, "States": aggregate.States(),
	})
}

func (c *Console) withdrawalPage(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	wv, err := c.app.Withdrawal(r.Context(), ss.p, id)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	evs, err := c.app.Events(r.Context(), ss.p, wv.ID)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	mine := wv.RequestedBy == ss.p.Name
	approvedBy := slices.ContainsFunc(wv.Approvals, func(a aggregate.Approval) bool { return a.By == ss.p.Name })
	requested := wv.State == aggregate.StateRequested
	data := map[string]any{
		"W":          wv,
		"Timeline":   timeline(evs.Events),
		"Mine":       mine,
		"ApprovedBy": approvedBy,
		"CanApprove": requested && ss.p.Has(api.RoleApprover) && !mine && !approvedBy,
		"CanDecline": requested && ss.p.Has(api.RoleApprover),
		"CanCancel":  (wv.State == aggregate.StateRequested || wv.State == aggregate.StateApproved) && (mine || ss.p.Has(api.RoleOperator)),
	}
	c.renderLive(w, r, ss, http.StatusOK, "withdrawal", "Withdrawal "+short(wv.ID), wv.ID, data)
}

// act runs a decision and tells the outcome on the next page (POST, then
// redirect: a reload never repeats it).
func (c *Console) act(w http.ResponseWriter, r *http.Request, ss *session, ok string, fn func() (aggregate.WithdrawalView, error)) {
	id := r.PathValue("id")
	back := localPath(r.PostForm.Get("return"), "/console/withdrawals/"+url.PathEscape(id))
	wv, err := fn()
	if err != nil {
		status, d, internal := api.Classify(err)
		if internal {
			infoOf(r).err = err
		}
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || internal {
			c.refuse(w, r, ss, err)
			return
		}
		c.sessions.addFlash(ss, flash{Kind: "error", Text: readable(d), Code: d.Code})
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	c.sessions.addFlash(ss, flash{Kind: "ok", Text: ok + " " + outcome(wv)})
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (c *Console) approve(w http.ResponseWriter, r *http.Request, ss *session) {
	c.act(w, r, ss, "Your approval is recorded.", func() (aggregate.WithdrawalView, error) {
		return c.app.Approve(r.Context(), ss.p, r.PathValue("id"))
	})
}

func (c *Console) decline(w http.ResponseWriter, r *http.Request, ss *session) {
	c.act(w, r, ss, "Declined.", func() (aggregate.WithdrawalView, error) {
		return c.app.Decline(r.Context(), ss.p, r.PathValue("id"), r.PostForm.Get("reason"))
	})
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request, ss *session) {
	c.act(w, r, ss, "Cancelled.", func() (aggregate.WithdrawalView, error) {
		return c.app.Cancel(r.Context(), ss.p, r.PathValue("id"))
	})
}

func (c *Console) inFlightPage(w http.ResponseWriter, r *http.Request, ss *session) {
	inflight, err := c.app.Queue(r.Context(), ss.p, "in-flight", api.Page{Limit: consolePageLimit, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	ready, err := c.app.Queue(r.Context(), ss.p, "ready", api.Page{Limit: consolePageLimit})
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	c.renderLive(w, r, ss, http.StatusOK, "inflight", "In flight", "all", map[string]any{
		"InFlight": inflight.Items, "Next": inflight.NextCursor, "Ready": ready.Items, "MoreReady": ready.NextCursor != nil,
	})
}

// accountsPage offers the accounts the principal may name and those of
// recent withdrawals it may read, and a field to open any other.
func (c *Console) accountsPage(w http.ResponseWriter, r *http.Request, ss *session) {
	if id := strings.TrimSpace(r.URL.Query().Get("id")); id != "" {
		http.Redirect(w, r, "/console/accounts/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	var known []string
	for _, a := range ss.p.Accounts {
		if !strings.ContainsAny(a, "*?[") {
			known = append(known, a)
		}
	}
	if recent, err := c.app.List(r.Context(), ss.p, api.ListQuery{Limit: 100}); err == nil {
		for _, wv := range recent.Withdrawals {
			known = append(known, wv.Account)
		}
	}
	slices.Sort(known)
	known = slices.Compact(known)
	c.render(w, r, ss, http.StatusOK, "accounts", "Accounts", map[string]any{"Known": known})
}

func (c *Console) accountPage(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	acct, err := c.app.Account(r.Context(), ss.p, id)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	st, err := c.app.Statement(r.Context(), ss.p, api.StatementQuery{Account: id, Limit: consolePageLimit, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	c.renderLive(w, r, ss, http.StatusOK, "account", "Account "+id, "all", map[string]any{"A": acct, "Entries": st.Entries, "Next": st.NextCursor})
}

func (c *Console) policyPage(w http.ResponseWriter, r *http.Request, ss *session) {
	pol, err := c.app.Policy(r.Context(), ss.p)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	hist, err := c.app.PolicyHistory(r.Context(), ss.p)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	slices.Reverse(hist) // newest first
	c.render(w, r, ss, http.StatusOK, "policy", "Policy", map[string]any{"P": pol, "History": hist})
}

func (c *Console) walletPage(w http.ResponseWriter, r *http.Request, ss *session) {
	st, err := c.app.Wallet(r.Context(), ss.p)
	var none bool
	if err != nil {
		if _, d, _ := api.Classify(err); d.Code != api.CodeNotFound {
			c.refuse(w, r, ss, err)
			return
		}
		none = true
	}
	c.render(w, r, ss, http.StatusOK, "wallet", "Hot wallet", map[string]any{"S": st, "None": none})
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, ss *session) {
	list, err := c.app.Webhooks(r.Context(), ss.p)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	c.render(w, r, ss, http.StatusOK, "webhooks", "Webhooks", map[string]any{"Hooks": list.Webhooks})
}

func (c *Console) deliveriesPage(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	list, err := c.app.Webhooks(r.Context(), ss.p)
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	i := slices.IndexFunc(list.Webhooks, func(h webhookView) bool { return h.ID == id })
	if i < 0 {
		c.refuse(w, r, ss, errNotFound("no webhook "+id))
		return
	}
	ds, err := c.app.Deliveries(r.Context(), ss.p, id, api.Page{Limit: consolePageLimit})
	if err != nil {
		c.refuse(w, r, ss, err)
		return
	}
	c.render(w, r, ss, http.StatusOK, "deliveries", "Webhook deliveries", map[string]any{"Hook": list.Webhooks[i], "Deliveries": ds.Deliveries})
}

func errNotFound(msg string) error {
	return &aggregate.Error{Code: api.CodeNotFound, Message: msg}
}
