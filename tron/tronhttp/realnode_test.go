package tronhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// Bodies real gateways and nodes have answered with HTTP 200 that are not
// java-tron's "nothing here" ({}): each is a non-answer, never "unknown".
var nonAnswers = map[string]string{
	"null":                  `null`,
	"empty Error":           `{"Error":""}`,
	"gateway error object":  `{"error":{"code":429,"message":"rate limited"}}`,
	"statusCode 429":        `{"statusCode":429,"message":"Too Many Requests"}`,
	"other object":          `{"foo":1}`,
	"array":                 `[]`,
	"string":                `""`,
	"empty body":            ``,
	"id empty":              `{"id":""}`,
	"Error with whitespace": `{"Error":" "}`,
}

// A node that answers body to path (every other path: {}).
func stubPaths(t *testing.T, bodies map[string]string) *tronhttp.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			body = "{}\n"
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return tronhttp.NewHTTPNode(srv.URL, srv.Client())
}

func TestOnlyAnEmptyObjectFromGetTransactionInfoByIDMeansNotFound(t *testing.T) {
	ctx := context.Background()
	var txid [32]byte
	txid[0] = 7
	for _, empty := range []string{"{}", "{}\n", " {}\r\n"} {
		c := stubPaths(t, map[string]string{"/wallet/gettransactioninfobyid": empty, "/walletsolidity/gettransactioninfobyid": empty})
		if st, err := c.SolidLookup(ctx, txid); err != nil || st.State != tron.TxUnknown {
			t.Fatalf("%q: solid lookup %v, %v; want unknown", empty, st, err)
		}
		if st, err := c.Lookup(ctx, txid); err != nil || st.State != tron.TxUnknown {
			t.Fatalf("%q: lookup %v, %v; want unknown", empty, st, err)
		}
	}
	for name, body := range nonAnswers {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/wallet/gettransactioninfobyid", "/walletsolidity/gettransactioninfobyid"} {
				c := stubPaths(t, map[string]string{path: body})
				lookup := c.Lookup
				if strings.HasPrefix(path, "/walletsolidity/") {
					lookup = c.SolidLookup
				}
				if st, err := lookup(ctx, txid); !errors.Is(err, tron.ErrBadResponse) {
					t.Fatalf("%s answering %q: %v, %v; want ErrBadResponse (the saga waits), never unknown", path, body, st, err)
				}
			}
		})
	}
}

// Lookup's pending checks read {} as "not there" too, and nothing else.
func TestLookupPendingChecksTakeOnlyAnEmptyObjectAsAbsent(t *testing.T) {
	ctx := context.Background()
	var txid [32]byte
	for name, body := range nonAnswers {
		for _, path := range []string{"/wallet/gettransactionbyid", "/wallet/gettransactionfrompending"} {
			c := stubPaths(t, map[string]string{path: body})
			if st, err := c.Lookup(ctx, txid); !errors.Is(err, tron.ErrBadResponse) {
				t.Fatalf("%s: %s answering %q: %v, %v; want ErrBadResponse", name, path, body, st, err)
			}
		}
	}
}

func TestSolidBlockAndReceiptsRejectNonAnswers(t *testing.T) {
	ctx := context.Background()
	for name, body := range nonAnswers {
		c := stubPaths(t, map[string]string{"/walletsolidity/getblockbynum": body, "/walletsolidity/gettransactioninfobyblocknum": body})
		if b, err := c.SolidBlockByNum(ctx, 5); !errors.Is(err, tron.ErrBadResponse) {
			t.Fatalf("%s: block %+v, %v; want ErrBadResponse (only {} is ErrBlockNotSolid)", name, b, err)
		}
		if body == `[]` {
			continue // java-tron's answer for an empty block
		}
		if infos, err := c.SolidTxInfosByBlockNum(ctx, 5); !errors.Is(err, tron.ErrBadResponse) {
			t.Fatalf("%s: infos %+v, %v; want ErrBadResponse", name, infos, err)
		}
	}
}
