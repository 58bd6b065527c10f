package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/herald-mq/herald"
)

// Principals and bearer tokens of a server started with --auth (docs/security.md).
// Every call needs the admin grant; a client without credentials on the server's own
// host has it unless the server runs with --auth-loopback.

// Token describes a bearer token: its id (what RevokeToken takes), the principal it acts
// for, and a label saying what it is for. The token itself is shown once, by
// CreateToken; the server keeps only its hash.
type Token struct {
	ID        string `json:"id"`
	Principal string `json:"principal"`
	Label     string `json:"label,omitempty"`
}

// SetPrincipal creates the principal p.Name, or replaces its grants and limits: Grants
// are "admin", "action:Type" or "action:*" (herald.ValidGrant), and a positive
// StatementTimeout or MaxRowsScanned lowers the server's statement limits for it. An
// unknown grant is refused with E4001.
func (c *Client) SetPrincipal(ctx context.Context, p herald.Principal) error {
	if p.Name == "" || p.StatementTimeout < 0 || p.MaxRowsScanned < 0 {
		return invalid("set principal: want a name and limits of 0 or more (got %q, %s, %d)", p.Name, p.StatementTimeout, p.MaxRowsScanned)
	}
	body := map[string]any{"grants": p.Grants}
	if p.Grants == nil {
		body["grants"] = []string{}
	}
	if p.StatementTimeout > 0 {
		body["statement_timeout"] = p.StatementTimeout.String()
	}
	if p.MaxRowsScanned > 0 {
		body["max_rows_scanned"] = p.MaxRowsScanned
	}
	return c.admin(ctx, http.MethodPut, "/v1/principals/"+url.PathEscape(p.Name), body, nil)
}

// CreateToken makes a bearer token for principal, with label as a note, and returns the
// token (to pass to WithToken, or --token), which is not shown again, with its
// description.
func (c *Client) CreateToken(ctx context.Context, principal, label string) (string, Token, error) {
	var out struct {
		Secret string `json:"token"`
		Token
	}
	if err := c.admin(ctx, http.MethodPost, "/v1/tokens", map[string]string{"principal": principal, "label": label}, &out); err != nil {
		return "", Token{}, err
	}
	return out.Secret, out.Token, nil
}

// Tokens lists the server's bearer tokens (their descriptions, never the tokens).
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var out struct {
		Tokens []Token `json:"tokens"`
	}
	if err := c.admin(ctx, http.MethodGet, "/v1/tokens", nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken revokes the token with the id: requests carrying it are refused from now
// on, and streams it opened end. An unknown id is refused with E4007.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.admin(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil)
}

// admin makes a call of the token API and decodes a successful answer into out.
func (c *Client) admin(ctx context.Context, method, path string, body, out any) error {
	status, data, err := c.jsonCall(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		return answerError(status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return herald.Errorf(herald.CodeInternal, "client: %s %s: unexpected answer %.200q", method, path, data)
		}
	}
	return nil
}
