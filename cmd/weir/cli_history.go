package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

func init() {
	register(command{name: "list", summary: "list withdrawals, newest first (filters: --state, --account)", run: runList})
	register(command{name: "statement", summary: "list an account's credits, reservations, releases and settlements", run: runStatement})
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("list", "list [--state S] [--account A] [--limit N] [--cursor C] [flags]",
		"Lists withdrawals newest first, ended ones included, one page at a time. A principal that\n"+
			"is only a requester sees its own; approvers, operators and auditors see all.", stderr)
	o := addClientFlags(fs)
	var q api.ListQuery
	fs.StringVar(&q.State, "state", "", "only withdrawals in this state (requested, approved, …, confirmed, rejected, failed)")
	fs.StringVar(&q.Account, "account", "", "only this account's withdrawals")
	fs.IntVar(&q.Limit, "limit", api.DefaultPageLimit, fmt.Sprintf("withdrawals per page (at most %d)", api.MaxPageLimit))
	fs.StringVar(&q.Cursor, "cursor", "", "where the page starts: the cursor the page before printed")
	if _, err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	return clientExec(ctx, o, "list", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.ListBody], error) {
		return c.List(ctx, q)
	}, func(r api.Reply[api.ListBody]) error {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tREASON\tAMOUNT\tACCOUNT\tTO\tREQUESTER\tREQUESTED AT")
		for _, w := range r.Value.Withdrawals {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", w.ID, w.State, orDash(w.Reason), w.Amount, w.Asset,
				w.Account, w.ToAddress, w.RequestedBy, fmtTime(w.RequestedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d withdrawal(s)\n", len(r.Value.Withdrawals))
		if r.Value.NextCursor != nil {
			fmt.Fprintf(stdout, "more: weir list%s --cursor %s\n", listFlags(q), *r.Value.NextCursor)
		}
		return nil
	})
}

// listFlags repeats the filters for the "more:" line.
func listFlags(q api.ListQuery) string {
	var b strings.Builder
	if q.State != "" {
		b.WriteString(" --state " + q.State)
	}
	if q.Account != "" {
		b.WriteString(" --account " + q.Account)
	}
	return b.String()
}

func runStatement(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("statement", "statement ACCOUNT [--limit N] [--cursor C] [flags]",
		"Lists an account's movements newest first: credits (with who made them), reservations,\n"+
			"releases and settlements (with their withdrawal). A principal that is only a requester\n"+
			"sees the movements of its own withdrawals and credits.", stderr)
	o := addClientFlags(fs)
	var q api.StatementQuery
	fs.IntVar(&q.Limit, "limit", api.DefaultPageLimit, fmt.Sprintf("entries per page (at most %d)", api.MaxPageLimit))
	fs.StringVar(&q.Cursor, "cursor", "", "where the page starts: the cursor the page before printed")
	pos, err := parseArgs(fs, args, 1)
	if err != nil {
		return err
	}
	q.Account = pos[0]
	return clientExec(ctx, o, "statement", stdout, stderr, func(ctx context.Context, c *api.Client) (api.Reply[api.StatementBody], error) {
		return c.Statement(ctx, q)
	}, func(r api.Reply[api.StatementBody]) error {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tAT\tKIND\tAMOUNT\tWITHDRAWAL\tCREDIT\tBY")
		for _, e := range r.Value.Entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.UTC().Format(time.RFC3339), e.Kind, e.Amount,
				orDash(e.WithdrawalID), orDash(e.CreditID), orDash(e.By))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d entr(ies)\n", len(r.Value.Entries))
		if r.Value.NextCursor != nil {
			fmt.Fprintf(stdout, "more: weir statement %s --cursor %s\n", q.Account, *r.Value.NextCursor)
		}
		return nil
	})
}
