package tronhttp_test

import (
	"net/http/httptest"
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

func TestHTTPClientAgainstServedSimNodeSatisfiesTheNodeContract(t *testing.T) {
	nodetest.Run(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		srv := httptest.NewServer(tronhttp.NewHandler(sim))
		t.Cleanup(srv.Close)
		// The façade is weir's own: the worker header may go to it.
		node := tronhttp.New(tronhttp.Config{URL: srv.URL, HTTPClient: srv.Client(), SendWorker: true})
		return nodetest.Harness{Node: node, Sim: sim}
	})
}

func TestHTTPClientAgainstServedSimNodeSatisfiesTheWalletContract(t *testing.T) {
	nodetest.RunWallet(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		srv := httptest.NewServer(tronhttp.NewHandler(sim))
		t.Cleanup(srv.Close)
		node := tronhttp.New(tronhttp.Config{URL: srv.URL, HTTPClient: srv.Client()})
		return nodetest.Harness{Node: node, Sim: sim}
	})
}
