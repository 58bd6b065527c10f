package pgstore

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Server describes the PostgreSQL server a connection string names: where it is, and
// the settings that decide when a commit is durable, as the store's sessions see them
// (the database's and the role's defaults).
type Server struct {
	Network, Addr string // "tcp" and host:port, or "unix" and the socket's path
	Loopback      bool   // the host is this machine's loopback
	Version       string
	SyncCommit    string // synchronous_commit
	Fsync         string // fsync
	WALSync       string // wal_sync_method
}

// Address returns the network and address of the server dsn names (its first host).
func Address(dsn string) (network, addr string, loopback bool, err error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", "", false, fmt.Errorf("pgstore: %w", err)
	}
	port := strconv.Itoa(int(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		return "unix", filepath.Join(cfg.Host, ".s.PGSQL."+port), true, nil
	}
	ip := net.ParseIP(cfg.Host)
	return "tcp", net.JoinHostPort(cfg.Host, port), ip != nil && ip.IsLoopback() || cfg.Host == "localhost", nil
}

// Describe connects to the server dsn names and reads its version and durability
// settings.
func Describe(ctx context.Context, dsn string) (Server, error) {
	var s Server
	var err error
	if s.Network, s.Addr, s.Loopback, err = Address(dsn); err != nil {
		return s, err
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return s, fmt.Errorf("pgstore: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	err = c.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
		current_setting('fsync'), current_setting('wal_sync_method')`).Scan(&s.Version, &s.SyncCommit, &s.Fsync, &s.WALSync)
	if err != nil {
		return s, fmt.Errorf("pgstore: reading the server's settings: %w", err)
	}
	return s, nil
}

// CreateSchema creates an empty schema for a new store; it fails when the schema
// exists.
func CreateSchema(ctx context.Context, dsn, schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("pgstore: schema name %q: use lower-case letters, digits and underscores, at most 40", schema)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("pgstore: create schema %s: %w", schema, err)
	}
	return nil
}
