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
		return nodetest.Harness{Node: tronhttp.NewHTTPNode(srv.URL, srv.Client()), Sim: sim}
	})
}
