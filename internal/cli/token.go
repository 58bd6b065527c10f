package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
)

type tokenFlags struct {
	addr    string
	tls     tlsFlags
	timeout time.Duration
	json    bool
}

func newTokenCmd(stdout io.Writer) *cobra.Command {
	f := &tokenFlags{}
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke principals' bearer tokens",
		Long: `Manage the principals of a broker started with --auth and their bearer tokens.
Every subcommand needs the admin grant (a credential-less client on the broker's own
host has it, unless the broker runs with --auth-loopback).

A principal is a name with grants: admin (everything), or action:Type and action:*
with action one of read, write, watch, consume, settle. A token acts for its
principal; it is shown once, when it is created, and only its hash is kept.`,
		Example: `  herald token create --principal billing --grant consume:Invoice --grant settle:Invoice
  herald token create --principal ops --grant admin --label laptop
  herald token list
  herald token revoke tkb3x…`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(pf, &f.tls)
	pf.DurationVar(&f.timeout, "timeout", time.Minute, "time limit of one request")
	pf.BoolVar(&f.json, "json", false, "print JSON")
	cmd.AddCommand(newTokenCreateCmd(f, stdout), newTokenListCmd(f, stdout), newTokenRevokeCmd(f, stdout))
	return cmd
}

func newTokenCreateCmd(f *tokenFlags, stdout io.Writer) *cobra.Command {
	var principal, label string
	var grants []string
	var timeout time.Duration
	var rows int
	cmd := &cobra.Command{
		Use:   "create --principal NAME [--grant G]... [--label L]",
		Short: "Create a token for a principal (with --grant, create or replace the principal's grants first)",
		Args:  argCount(0, 0, "token create --principal NAME [--grant G]..."),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if principal == "" {
				return usageError(fmt.Errorf("--principal is required"))
			}
			if len(grants) == 0 && (timeout > 0 || rows > 0) {
				return usageError(fmt.Errorf("--statement-timeout and --max-rows-scanned go with --grant (they are set with the principal's grants)"))
			}
			ctx := cmd.Context()
			c, err := dial(ctx, f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			if len(grants) > 0 {
				p := herald.Principal{Name: principal, Grants: grants, StatementTimeout: max(timeout, 0), MaxRowsScanned: max(rows, 0)}
				if err := c.SetPrincipal(ctx, p); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
			}
			secret, tok, err := c.CreateToken(ctx, principal, label)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if f.json {
				return writeLine(stdout, compactJSON(map[string]any{"token": secret, "id": tok.ID, "principal": tok.Principal, "label": tok.Label}))
			}
			return writeString(stdout, fmt.Sprintf("token %s for %s (id %s); it is not shown again\n", secret, tok.Principal, tok.ID))
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "the principal the token acts for")
	cmd.Flags().StringArrayVar(&grants, "grant", nil, "a grant of the principal (repeat); replaces its grants")
	cmd.Flags().StringVar(&label, "label", "", "a note on what the token is for")
	cmd.Flags().DurationVar(&timeout, "statement-timeout", 0, "with --grant: the principal's own statement time limit, where lower than the server's")
	cmd.Flags().IntVar(&rows, "max-rows-scanned", 0, "with --grant: the principal's own limit on bindings a statement scans, where lower than the server's")
	return cmd
}

func newTokenListCmd(f *tokenFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the tokens (never the tokens themselves)",
		Args:  argCount(0, 0, "token list"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dial(cmd.Context(), f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			tokens, err := c.Tokens(cmd.Context())
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			// The --json output names the fields as it always has: ID, Principal, Label.
			out := make([]struct{ ID, Principal, Label string }, len(tokens))
			for i, t := range tokens {
				out[i].ID, out[i].Principal, out[i].Label = t.ID, t.Principal, t.Label
			}
			if f.json {
				return writeLine(stdout, compactJSON(out))
			}
			var b strings.Builder
			for _, t := range out {
				fmt.Fprintf(&b, "%s\t%s\t%s\n", t.ID, t.Principal, t.Label)
			}
			fmt.Fprintf(&b, "(%s)\n", plural(len(out), "token"))
			return writeString(stdout, b.String())
		},
	}
}

func newTokenRevokeCmd(f *tokenFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: requests carrying it are refused from now on",
		Args:  argCount(1, 1, "token revoke ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd.Context(), f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			return writeString(stdout, "revoked "+args[0]+"\n")
		},
	}
}
