package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// hotWallet is the hot wallet in force in these tests' configuration.
var hotWallet = tron.MustParseAddress("TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy")

const blocked = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"

// destinationEnv serves with a configuration in force naming hotWallet and
// a blocklist naming blocked, as serve --destination-blocklist does.
func destinationEnv(t *testing.T) *env {
	return newEnv(t, envOpts{intake: func(t *testing.T, repo *sagas.Repo, in *sagas.Intake) {
		cs, _, err := repo.StartConfig(t.Context(), aggregate.Config{HotWallets: []string{hotWallet.String()}, PolicyQuorum: 1},
			sagas.ConfigPublish{By: aggregate.SystemActor, Process: "destination test", At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		in.UseConfig(sagas.NewConfigSource(repo, cs, nil))
		in.SetDestinationBlocklist([]tron.Address{tron.MustParseAddress(blocked)})
	}})
}

// refusedDestination asks to pay to and expects 422 invalid_address on
// to_address whose message says why, and nothing created.
func refusedDestination(t *testing.T, e *env, to, why string) {
	t.Helper()
	id := uuid.NewString()
	body := reqBody{"operation_id": id, "account": "acme", "to_address": to, "amount": "1", "asset": "USDT-TRC20"}
	r := e.do(t, "POST", "/v1/withdrawals", tokAlice, body)
	wantErr(t, r, http.StatusUnprocessableEntity, "invalid_address", "to_address")
	if !strings.Contains(string(r.body), why) {
		t.Fatalf("the refusal does not say %q: %s", why, r.body)
	}
	wantErr(t, e.do(t, "GET", "/v1/withdrawals/"+id, tokAlice, nil), http.StatusNotFound, "not_found", "")
}

func TestWithdrawalToTheUSDTContractIsRefused(t *testing.T) {
	e := destinationEnv(t)
	e.credit(t, "acme", "seed", "100")
	refusedDestination(t, e, tron.USDTContract.String(), "USDT contract")
	refusedDestination(t, e, tron.USDTContract.Hex(), "USDT contract")
}

func TestWithdrawalToTheBurnAddressIsRefused(t *testing.T) {
	e := destinationEnv(t)
	e.credit(t, "acme", "seed", "100")
	refusedDestination(t, e, "T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb", "burn")
	refusedDestination(t, e, "41"+strings.Repeat("00", 20), "burn")
}

func TestWithdrawalToTheHotWalletIsRefused(t *testing.T) {
	e := destinationEnv(t)
	e.credit(t, "acme", "seed", "100")
	refusedDestination(t, e, hotWallet.String(), "hot wallet")
	refusedDestination(t, e, hotWallet.Hex(), "hot wallet")
}

func TestWithdrawalToABlocklistedAddressIsRefusedAndOthersPass(t *testing.T) {
	e := destinationEnv(t)
	e.credit(t, "acme", "seed", "100")
	refusedDestination(t, e, blocked, "blocklist")
	// An ordinary destination still goes through.
	r := e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(uuid.NewString(), "acme", "1"))
	wantStatus(t, r, http.StatusCreated)
}
