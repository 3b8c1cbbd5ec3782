package sagas

import (
	"context"
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// BurnAddress is TRON's zero account, T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb
// (hex 41 followed by twenty zero bytes): nobody holds its key, so USDT
// sent there is gone.
var BurnAddress = tron.Address{tron.AddressPrefix}

// SetDestinationBlocklist adds addresses that a withdrawal may never pay
// (--destination-blocklist), on top of the ones refused by default.
func (in *Intake) SetDestinationBlocklist(addrs []tron.Address) {
	m := make(map[tron.Address]struct{}, len(addrs))
	for _, a := range addrs {
		m[a] = struct{}{}
	}
	in.blocklist = m
}

// refuseDestination refuses a destination that can only lose money: the
// USDT contract itself (tokens sent to a contract are stuck there), the
// burn address, a hot wallet in force (paying ourselves burns a fee and
// moves nothing) and the configured blocklist.
func (in *Intake) refuseDestination(ctx context.Context, to tron.Address) error {
	var why string
	switch _, blocked := in.blocklist[to]; {
	case to == tron.USDTContract:
		why = "is the USDT contract itself; tokens sent to it cannot be recovered"
	case to == BurnAddress:
		why = "is the zero (burn) address; nobody holds its key"
	case in.config != nil && in.config.Current(ctx).Config.IsHotWallet(to.String()):
		why = "is weir's own hot wallet; paying it burns a fee and moves nothing"
	case blocked:
		why = "is on the destination blocklist"
	default:
		return nil
	}
	return &aggregate.Error{Code: aggregate.CodeInvalidAddress, Field: "to_address", Message: fmt.Sprintf("to_address %s %s", to, why)}
}
