package sagas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

// TestStoreFailuresBecomeUnavailableAndKeepTheirCause: what Repo hands a
// transport says "retry later" for every store or NATS failure, with a
// message fit for a caller, while the cause stays testable; refusals and
// bugs pass through untouched.
func TestStoreFailuresBecomeUnavailableAndKeepTheirCause(t *testing.T) {
	conflict := &eventstore.ConflictError{Key: eventstore.Key{Type: "withdrawal", ID: "w"}}
	cases := []struct {
		name        string
		err         error
		unavailable bool
		message     string
		cause       error
	}{
		{"outcome unknown", &eventstore.OutcomeUnknownError{Err: nats.ErrTimeout}, true, "did not confirm the write", eventstore.ErrOutcomeUnknown},
		{"conflict", fmt.Errorf("append: %w", conflict), true, "unavailable or too busy", eventstore.ErrConflict},
		{"contention", fmt.Errorf("w: %w", ErrTooMuchContention), true, "unavailable or too busy", ErrTooMuchContention},
		{"deadline", fmt.Errorf("load: %w", context.DeadlineExceeded), true, "unavailable or too busy", context.DeadlineExceeded},
		{"connection closed", nats.ErrConnectionClosed, true, "unavailable or too busy", nats.ErrConnectionClosed},
		{"server shutdown", jetstream.ErrServerShutdown, true, "unavailable or too busy", jetstream.ErrServerShutdown},
		{"jetstream 503", &jetstream.APIError{Code: 503, ErrorCode: 10008}, true, "unavailable or too busy", nil},
		{"jetstream 400", &jetstream.APIError{Code: 400, ErrorCode: 10052}, false, "", nil},
		{"domain refusal", &aggregate.Error{Code: aggregate.CodeInsufficientFunds}, false, "", aggregate.ErrInsufficientFunds},
		{"corrupt store", fmt.Errorf("load: %w", eventstore.ErrCorrupt), false, "", eventstore.ErrCorrupt},
	}
	for _, c := range cases {
		got := unavailable(c.err)
		if errors.Is(got, ErrUnavailable) != c.unavailable {
			t.Errorf("%s: unavailable = %v, want %v (%v)", c.name, !c.unavailable, c.unavailable, got)
			continue
		}
		if c.cause != nil && !errors.Is(got, c.cause) {
			t.Errorf("%s: cause %v lost in %v", c.name, c.cause, got)
		}
		var ue *UnavailableError
		if !c.unavailable {
			if got != c.err {
				t.Errorf("%s: %v changed to %v", c.name, c.err, got)
			}
			continue
		}
		if !errors.As(got, &ue) || !strings.Contains(ue.Message, c.message) {
			t.Errorf("%s: message %q, want it to say %q", c.name, ue.Message, c.message)
		}
		if again := unavailable(got); again != got {
			t.Errorf("%s: wrapped twice: %v", c.name, again)
		}
	}
}

// TestRepoReportsAStoreThatIsDownAsUnavailable: with the server gone, a
// read and a write through Repo both come back as ErrUnavailable.
func TestRepoReportsAStoreThatIsDownAsUnavailable(t *testing.T) {
	ctx := context.Background()
	srv := eventstoretest.Start(t)
	repo := NewRepo(srv.Store(ctx, eventlog.NewRegistry()))
	credit := aggregate.Credit{Account: "acme", CreditID: "c1", Amount: aggregate.MustParseAmount(aggregate.USDT, "1"), At: time.Now().UTC()}
	if _, _, err := repo.UpdateAccount(ctx, "acme", credit); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	if _, _, err := repo.Account(ctx, "acme"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("read with the server down: %v, want unavailable", err)
	}
	credit.CreditID = "c2"
	if _, _, err := repo.UpdateAccount(ctx, "acme", credit); !errors.Is(err, ErrUnavailable) {
		t.Errorf("write with the server down: %v, want unavailable", err)
	}
}
