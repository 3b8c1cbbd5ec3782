package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// durable snapshot.
func (a Account) MarshalSnapshot() ([]byte, error) {
	if !a.compact {
		return nil, ErrNotCompact
	}
	return json.Marshal(accountSnapshot{
		ID: a.ID, Version: a.Version,
		Credited: a.credited, Available: a.available, Reserved: a.reserved, Settled: a.settled,
		Credits: a.credits, Pending: a.pending, ApprovedBy: a.approvedBy, Reservations: a.reservations.asMap(), Daily: a.daily,
		Recent: a.recent.list(), Forgotten: a.forgotten, ForgottenUnknown: a.forgottenUnknown,
	})
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
