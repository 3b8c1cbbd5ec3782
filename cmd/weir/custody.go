package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/tron"
)

// custodyEntry is one line of the --custody file: a destination address we
// custody and the account it credits (the internal route).
type custodyEntry struct {
	Address string `json:"address"`
	Account string `json:"account"`
}

// custody maps custodied destination addresses (base58) to accounts.
type custody map[string]string

// lookup is the broadcast saga's routing question: is this destination ours?
func (c custody) lookup(to string) (string, bool) {
	a, err := tron.ParseAddress(to)
	if err != nil {
		return "", false
	}
	acct, ok := c[a.String()]
	return acct, ok
}

func loadCustody(path string) (custody, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("custody: %w", err)
	}
	var entries []custodyEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("custody %s: %w", path, err)
	}
	// An "account" given twice, or "Account" beside "account", would route
	// a destination where the file's reader does not see it go.
	if err := api.CheckKeys(b, entries); err != nil {
		return nil, fmt.Errorf("custody %s: %w", path, err)
	}
	return newCustody(entries)
}

func newCustody(entries []custodyEntry) (custody, error) {
	c := custody{}
	for i, e := range entries {
		a, err := tron.ParseAddress(e.Address)
		if err != nil {
			return nil, fmt.Errorf("custody entry %d: address: %w", i, err)
		}
		if err := aggregate.ValidateAccountID(e.Account); err != nil {
			return nil, fmt.Errorf("custody entry %d: account: %w", i, err)
		}
		c[a.String()] = e.Account
	}
	return c, nil
}

// devCustodyAddress is custodied by the dev defaults: a withdrawal to it is
// an internal transfer to account "treasury" (no chain, no fee).
const devCustodyAddress = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"

func devCustody() custody {
	c, err := newCustody([]custodyEntry{{Address: devCustodyAddress, Account: "treasury"}})
	if err != nil {
		panic(err)
	}
	return c
}
