package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
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
			c, err := newAPIClient(f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if len(grants) > 0 {
				body := map[string]any{"grants": grants}
				if timeout > 0 {
					body["statement_timeout"] = timeout.String()
				}
				if rows > 0 {
					body["max_rows_scanned"] = rows
				}
				if err := c.admin(ctx, http.MethodPut, "/v1/principals/"+url.PathEscape(principal), body, nil); err != nil {
					return err
				}
			} else if timeout > 0 || rows > 0 {
				return usageError(fmt.Errorf("--statement-timeout and --max-rows-scanned go with --grant (they are set with the principal's grants)"))
			}
			var out struct {
				Token, ID, Principal, Label string
			}
			if err := c.admin(ctx, http.MethodPost, "/v1/tokens", map[string]any{"principal": principal, "label": label}, &out); err != nil {
				return err
			}
			if f.json {
				return writeLine(stdout, compactJSON(map[string]any{"token": out.Token, "id": out.ID, "principal": out.Principal, "label": out.Label}))
			}
			return writeString(stdout, fmt.Sprintf("token %s for %s (id %s); it is not shown again\n", out.Token, out.Principal, out.ID))
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
			c, err := newAPIClient(f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			var out struct {
				Tokens []struct{ ID, Principal, Label string }
			}
			if err := c.admin(cmd.Context(), http.MethodGet, "/v1/tokens", nil, &out); err != nil {
				return err
			}
			if f.json {
				return writeLine(stdout, compactJSON(out.Tokens))
			}
			var b strings.Builder
			for _, t := range out.Tokens {
				fmt.Fprintf(&b, "%s\t%s\t%s\n", t.ID, t.Principal, t.Label)
			}
			fmt.Fprintf(&b, "(%s)\n", plural(len(out.Tokens), "token"))
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
			c, err := newAPIClient(f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			if err := c.admin(cmd.Context(), http.MethodDelete, "/v1/tokens/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return writeString(stdout, "revoked "+args[0]+"\n")
		},
	}
}

// admin calls the token API and decodes a successful answer into out.
func (c *apiClient) admin(ctx context.Context, method, path string, body, out any) error {
	status, data, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		return &ExitError{Code: 1, Err: decodeError(status, data)}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("unexpected answer: %v", err)
		}
	}
	return nil
}
