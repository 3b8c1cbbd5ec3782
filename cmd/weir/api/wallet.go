package api

import "github.com/weir-payouts/weir/sagas/hotwallet"

// Wallet is what GET /v1/wallet shows: the hot wallet's last reading and
// whether sending is paused (*hotwallet.Monitor).
type Wallet interface {
	Status() hotwallet.Status
}

// walletStatus answers GET /v1/wallet. Any authenticated principal may
// read it: balances of the hot wallet are public on chain anyway, and a
// requester needs to know why its approved withdrawal waits.
func (o *ops) walletStatus() (result, error) {
	if o.wallet == nil {
		return result{}, apiError(CodeNotFound, "", "no hot wallet is watched by this process")
	}
	return result{body: o.wallet.Status()}, nil
}
