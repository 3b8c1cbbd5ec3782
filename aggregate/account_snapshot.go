package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// AccountSnapshotSchema numbers the shape of a stored account snapshot and
// what the fold computes into it. Bump it when either changes (a field
// added to Account, EvolveAccount keeping something new): a snapshot of
// another schema is not read, the account is folded from its log.
const AccountSnapshotSchema = 1

// accountSnapshot is every field of a compact Account. A field added to
// Account must be added here (TestAccountSnapshotCoversEveryField).
type accountSnapshot struct {
	ID           string                   `json:"id"`
	Version      uint64                   `json:"version"`
	Credited     Amount                   `json:"credited"`
	Available    Amount                   `json:"available"`
	Reserved     Amount                   `json:"reserved"`
	Settled      Amount                   `json:"settled"`
	Credits      map[string]Amount        `json:"credits"`
	Pending      map[string]PendingCredit `json:"pending"`
	ApprovedBy   map[string]string        `json:"approved_by"`
	Reservations map[string]Reservation   `json:"reservations"`
	Daily        map[string]Amount        `json:"daily"`
	Recent       []recentReservation      `json:"recent"`
	Forgotten    time.Time                `json:"forgotten"`
	// ForgottenUnknown: a reservation without requested_at was dropped.
	ForgottenUnknown bool `json:"forgotten_unknown"`
}

// ErrNotCompact: only the live, compact fold (FoldAccountFrom) is
// snapshotted; a full fold keeps the account's whole history.
var ErrNotCompact = errors.New("aggregate: only a compact account state is snapshotted")

// MarshalSnapshot encodes a compact account state (FoldAccountFrom) for a
// durable snapshot: the JSON encoding of accountSnapshot (map members
// sorted by key), written without reflection — a busy account's snapshot
// holds thousands of reservations, and it is written every so many events.
func (a Account) MarshalSnapshot() ([]byte, error) {
	if !a.compact {
		return nil, ErrNotCompact
	}
	w := snapshotWriter{buf: make([]byte, 0, 512+a.reservations.len()*320+a.recent.len()*160)}
	w.raw(`{"id":`)
	w.str(a.ID)
	w.raw(`,"version":`)
	w.buf = strconv.AppendUint(w.buf, a.Version, 10)
	for _, f := range []struct {
		key string
		v   Amount
	}{{"credited", a.credited}, {"available", a.available}, {"reserved", a.reserved}, {"settled", a.settled}} {
		w.raw(`,"` + f.key + `":`)
		w.amount(f.v)
	}
	w.raw(`,"credits":`)
	w.json(a.credits)
	w.raw(`,"pending":`)
	w.json(a.pending)
	w.raw(`,"approved_by":`)
	w.json(a.approvedBy)
	w.raw(`,"reservations":`)
	{
		ids := make([]string, 0, a.reservations.len())
		for id := range a.reservations.all() {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		w.raw("{")
		for i, id := range ids {
			if i > 0 {
				w.raw(",")
			}
			r, _ := a.reservations.get(id)
			w.str(id)
			w.raw(`:{"withdrawal_id":`)
			w.str(r.WithdrawalID)
			w.raw(`,"amount":`)
			w.amount(r.Amount)
			w.raw(`,"day":`)
			w.str(r.Day)
			w.raw(`,"status":`)
			w.str(string(r.Status))
			w.raw(`,"at":`)
			w.time(r.At)
			w.raw(`,"closed_at":`)
			w.time(r.ClosedAt)
			if r.Reason != "" {
				w.raw(`,"reason":`)
				w.str(r.Reason)
			}
			if !r.RequestedAt.IsZero() {
				w.raw(`,"requested_at":`)
				w.time(r.RequestedAt)
			}
			w.raw("}")
		}
		w.raw("}")
	}
	w.raw(`,"daily":`)
	w.json(a.daily)
	w.raw(`,"recent":`)
	if a.recent.len() == 0 {
		w.raw("null") // as encoding/json writes an empty list() (nil)
	} else {
		w.raw("[")
		first := true
		for r := range a.recent.all() {
			if !first {
				w.raw(",")
			}
			first = false
			w.raw(`{"WithdrawalID":`)
			w.str(r.WithdrawalID)
			w.raw(`,"Amount":`)
			w.amount(r.Amount)
			w.raw(`,"At":`)
			w.time(r.At)
			w.raw(`,"Released":`)
			w.buf = strconv.AppendBool(w.buf, r.Released)
			w.raw("}")
		}
		w.raw("]")
	}
	w.raw(`,"forgotten":`)
	w.time(a.forgotten)
	w.raw(`,"forgotten_unknown":`)
	w.buf = strconv.AppendBool(w.buf, a.forgottenUnknown)
	w.raw("}")
	if w.err != nil {
		return nil, fmt.Errorf("account snapshot: %w", w.err)
	}
	return w.buf, nil
}

// snapshotWriter appends JSON as encoding/json writes it; the first error
// sticks.
type snapshotWriter struct {
	buf []byte
	err error
}

func (w *snapshotWriter) raw(s string) { w.buf = append(w.buf, s...) }

// str writes a JSON string; one encoding/json would escape (HTML
// characters, controls, anything not ASCII) is left to it.
func (w *snapshotWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.json(s)
			return
		}
	}
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '"')
}

func (w *snapshotWriter) amount(v Amount) {
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, v.FixedString()...)
	w.buf = append(w.buf, '"')
}

func (w *snapshotWriter) time(t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		w.json(t) // encoding/json's error for a year it cannot write
		return
	}
	w.buf = append(w.buf, '"')
	w.buf = t.AppendFormat(w.buf, time.RFC3339Nano)
	w.buf = append(w.buf, '"')
}

func (w *snapshotWriter) json(v any) {
	data, err := json.Marshal(v)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.buf = append(w.buf, data...)
}

// UnmarshalAccountSnapshot decodes what MarshalSnapshot wrote. It refuses
// unknown members, a closed reservation (a compact state holds none) and
// a state whose invariants do not hold; it cannot know whether the state
// is the fold of the log it claims to cover — the caller checks that the
// snapshot is authentic (tagged under the event key) and that the log
// passes through its position (eventstore.LoadSince).
func UnmarshalAccountSnapshot(data []byte) (Account, error) {
	var s accountSnapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Account{}, fmt.Errorf("account snapshot: %w", err)
	}
	if dec.More() {
		return Account{}, errors.New("account snapshot: trailing data")
	}
	a := Account{
		ID: s.ID, Version: s.Version,
		credited: s.Credited, available: s.Available, reserved: s.Reserved, settled: s.Settled,
		credits: s.Credits, pending: s.Pending, approvedBy: s.ApprovedBy, reservations: reservationsFrom(s.Reservations), daily: s.Daily,
		recent: recentFrom(s.Recent), forgotten: s.Forgotten, forgottenUnknown: s.ForgottenUnknown, compact: true,
	}.owned()
	if a.ID != "" {
		if err := ValidateAccountID(a.ID); err != nil {
			return Account{}, fmt.Errorf("account snapshot: %w", err)
		}
	}
	for id, r := range s.Reservations {
		if r.Status != ReservationHeld || r.WithdrawalID != id {
			return Account{}, fmt.Errorf("account snapshot: reservation %s is %s", id, r.Status)
		}
	}
	if err := a.CheckInvariants(); err != nil {
		return Account{}, fmt.Errorf("account snapshot: %w", err)
	}
	return a, nil
}
