package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/webhook"
)

type webhookView = webhook.View

// timeLayout is how the console shows a time: to the second, in UTC, the
// same wherever it appears (callers convert to UTC first).
const timeLayout = "2006-01-02 15:04:05 UTC"

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"utc": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format(timeLayout)
		},
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		// ms is a chain time (milliseconds since the epoch) in UTC.
		"ms": func(ms int64) string { return time.UnixMilli(ms).UTC().Format(timeLayout) },
		"age": func(now, t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return relative(now.Sub(t))
		},
		"until": func(now, t time.Time) string { return relative(t.Sub(now)) },
		"txurl": func(txid string) string {
			if c.cfg.TxLink == "-" || txid == "" {
				return ""
			}
			return fmt.Sprintf(c.cfg.TxLink, url64(txid))
		},
		"has":   func(p *api.Principal, role string) bool { return p != nil && p.Has(api.Role(role)) },
		"short": short,
		"str": func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		},
		"tm": func(t *time.Time) time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		},
		"join": strings.Join,
		"path": func(s string) string { return strings.ReplaceAll(pathEscape(s), "%2F", "/") },
	}
}

// url64 keeps only hex digits of a txid for the link-out.
func url64(txid string) string {
	return strings.Map(func(r rune) rune {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F') {
			return r
		}
		return -1
	}, txid)
}

func pathEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-._~", r):
			b.WriteRune(r)
		default:
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
	}
	return b.String()
}

// relative is an age for people: "42s ago", "3m 5s ago", "2h 10m ago",
// "4d 3h ago"; a future time reads "in …".
func relative(d time.Duration) string {
	suffix, prefix := " ago", ""
	if d < 0 {
		d, suffix, prefix = -d, "", "in "
	}
	d = d.Round(time.Second)
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	return prefix + s + suffix
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// messages say in words what each refusal means to the person at the
// console; the code and the API's own message are shown beside them.
var messages = map[string]string{
	aggregate.CodeSelfApproval:      "You requested this withdrawal, so you cannot approve it: another approver must (four eyes).",
	api.CodeForbidden:               "You are not allowed to do this.",
	aggregate.CodeInvalidTransition: "This withdrawal is no longer in a state that allows this; it may have been approved, declined or cancelled meanwhile.",
	aggregate.CodeNotCancellable:    "This withdrawal can no longer be cancelled.",
	api.CodeNotFound:                "There is no such thing here.",
	api.CodeRateLimited:             "Too many requests; wait a moment and try again.",
	api.CodeUnavailable:             "weir is busy or its store is unreachable; try again shortly.",
	aggregate.CodeInvalidCommand:    "The form is incomplete or not valid.",
	sagas.CodeIntegrityViolation:    "This record failed its integrity check and is quarantined; tell an operator.",
}

// readable is a refusal in words, with the API's message when it adds to
// them.
func readable(d api.ErrorDetail) string {
	m, ok := messages[d.Code]
	if !ok {
		return d.Message
	}
	if d.Message != "" && d.Message != d.Code {
		detail := d.Message
		if d.Field != "" && !strings.Contains(detail, d.Field) {
			detail = d.Field + ": " + detail
		}
		return m + " (" + detail + ")"
	}
	return m
}

// outcome says where a withdrawal stands after a decision.
func outcome(w aggregate.WithdrawalView) string {
	switch w.State {
	case aggregate.StateRequested:
		return fmt.Sprintf("It has %d of %d approvals.", len(w.Approvals), w.RequiredApprovals)
	case aggregate.StateApproved:
		return "It is approved and goes to the chain."
	case aggregate.StateRejected:
		return "It is rejected (" + strPtr(w.Reason) + ")."
	}
	return "It is " + string(w.State) + "."
}

func strPtr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// step is one event of a withdrawal's timeline, with what a reader looks
// for pulled out of its data.
type step struct {
	sagas.EventView
	Who           string
	PolicyVersion string
	Rule          string
	TxID          string
	Evidence      []string
	Detail        string // the whole event data, indented
}

// timeline reads the events as the log holds them; nothing is inferred
// that an event does not say.
func timeline(evs []sagas.EventView) []step {
	out := make([]step, len(evs))
	for i, e := range evs {
		s := step{EventView: e}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(e.Data))
		dec.UseNumber() // block numbers and amounts exactly as stored
		if dec.Decode(&m) == nil {
			approval, _ := m["approval"].(map[string]any)
			envelope, _ := m["envelope"].(map[string]any)
			s.Who = firstString(m["by"], m["requested_by"], approval["by"], m["worker"])
			s.PolicyVersion = firstString(m["policy_version"], approval["policy_version"])
			s.Rule = firstString(m["rule"], approval["rule"])
			s.TxID = firstString(m["txid"], envelope["txid"])
			if v := firstString(m["retired_txid"]); v != "" {
				s.Evidence = append(s.Evidence, "retired txid "+v)
			}
			for _, k := range []string{"block_number", "receipt", "result", "send", "attempt", "reason", "detail", "lease_until"} {
				if v := firstString(m[k]); v != "" {
					if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
						v = t.UTC().Format(timeLayout)
					}
					s.Evidence = append(s.Evidence, strings.ReplaceAll(k, "_", " ")+" "+v)
				}
			}
			if ev, ok := m["evidence"]; ok && ev != nil {
				b, _ := json.Marshal(ev)
				s.Evidence = append(s.Evidence, "evidence "+string(b))
			}
		}
		var buf bytes.Buffer
		if json.Indent(&buf, e.Data, "", "  ") == nil {
			s.Detail = buf.String()
		} else {
			s.Detail = string(e.Data)
		}
		out[i] = s
	}
	return out
}

// firstString is the first of vs that is a non-empty string or a number.
func firstString(vs ...any) string {
	for _, v := range vs {
		switch x := v.(type) {
		case string:
			if x != "" {
				return x
			}
		case json.Number:
			if x != "0" {
				return x.String()
			}
		}
	}
	return ""
}
