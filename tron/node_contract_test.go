package tron_test

import (
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

func TestSimNodeSatisfiesTheNodeContract(t *testing.T) {
	nodetest.Run(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: sim, Sim: sim}
	})
}

func TestObservedNodeSatisfiesTheNodeContract(t *testing.T) {
	nodetest.Run(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: tron.NewObserved(sim), Sim: sim}
	})
}

func TestSimNodeSatisfiesTheWalletContract(t *testing.T) {
	nodetest.RunWallet(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: sim, Sim: sim}
	})
}

func TestObservedNodeSatisfiesTheWalletContract(t *testing.T) {
	nodetest.RunWallet(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: tron.NewObserved(sim), Sim: sim}
	})
}
