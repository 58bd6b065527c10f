package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// schemaVersion is the version of the tables below, kept in the schema_version table.
// Open creates them in an empty schema, upgrades an older one (upgrades), and refuses a
// schema of a newer version.
const schemaVersion = 2

// upgrades[v] takes a schema from version v+1 to v+2: upgrades[0] is the cluster_nodes table
// of version 2.
var upgrades = []string{`
-- The nodes sharing the store, as each last reported itself (Heartbeat): what
-- herald status lists. seen_at is on the database's clock.
CREATE TABLE {s}.cluster_nodes (
	name     text PRIMARY KEY,
	address  text NOT NULL,
	role     text NOT NULL,
	seq      bigint NOT NULL,
	behind   double precision NOT NULL,
	seen_at  timestamptz NOT NULL
);
`}

// schemaDDL creates the tables of one store. {s} stands for the quoted schema name.
//
// Keys are bytea (node ids and edge keys may hold any bytes, NUL included, which text
// cannot), compared bytewise, so ORDER BY gives the key order Pebble gives. Records are
// the encodings of store/codec.go. Seqs and ticks are bigint: seqs above 2^63-1 are
// refused; a tick is stored as the bigint of the same 64 bits.
const schemaDDL = `
CREATE TABLE {s}.schema_version (version int NOT NULL);
INSERT INTO {s}.schema_version VALUES (0);

-- The position: one row, written by every commit that applies a change set.
CREATE TABLE {s}.meta (
	id      int PRIMARY KEY CHECK (id = 1),
	seq     bigint NOT NULL,
	tick    bigint NOT NULL,
	horizon bigint NOT NULL
);
INSERT INTO {s}.meta VALUES (1, 0, 0, 0);

CREATE TABLE {s}.types (name bytea PRIMARY KEY, rec bytea NOT NULL);
CREATE TABLE {s}.nodes (id bytea PRIMARY KEY, rec bytea NOT NULL);
CREATE TABLE {s}.edges (key bytea PRIMARY KEY, rec bytea NOT NULL);
-- The change log, and the bodies of nodes (written once, by the commit that made them).
CREATE TABLE {s}.changes (seq bigint PRIMARY KEY, cs bytea NOT NULL);
CREATE TABLE {s}.bodies (node bytea, seq bigint, data bytea NOT NULL, PRIMARY KEY (node, seq));
-- Bodies that the commit at seq let go: Truncate past seq removes them.
CREATE TABLE {s}.dead_bodies (seq bigint, body_seq bigint, node bytea, PRIMARY KEY (seq, body_seq, node));
CREATE TABLE {s}.aux (key bytea PRIMARY KEY, value bytea NOT NULL);

-- The leadership lease: term counts acquisitions; holder is null while nobody holds it.
-- expires_at is on the database's clock.
CREATE TABLE {s}.leader (
	id         int PRIMARY KEY CHECK (id = 1),
	term       bigint NOT NULL,
	holder     text,
	address    text NOT NULL,
	expires_at timestamptz NOT NULL
);
INSERT INTO {s}.leader VALUES (1, 0, NULL, '', now());

-- fence fails unless the lease's term is want and held. Term 0 (no leadership) passes
-- only while nobody has ever taken the lease. It share-locks the lease row, so a
-- concurrent Acquire waits for the calling transaction to end, or it sees the new term.
CREATE FUNCTION {s}.fence(want bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	cur bigint;
	who text;
BEGIN
	SELECT l.term, l.holder INTO cur, who FROM {s}.leader l WHERE l.id = 1 FOR SHARE;
	IF want = 0 AND cur = 0 THEN
		RETURN;
	END IF;
	IF cur <> want OR who IS NULL THEN
		RAISE EXCEPTION 'herald: fenced: this store leads term %, the lease is at term % (held: %)', want, cur, who IS NOT NULL
			USING ERRCODE = 'HR001';
	END IF;
END $$;

-- advance moves the position from expect to (seq, tick), or fails if another writer
-- moved it. Locking the row first waits for a commit in flight that holds it and then
-- reads its latest version: an UPDATE whose condition named the seq would test the
-- version of its snapshot instead, and miss the commit it should wait for.
CREATE FUNCTION {s}.advance(expect bigint, seq bigint, tick bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	cur bigint;
BEGIN
	SELECT m.seq INTO cur FROM {s}.meta m WHERE m.id = 1 FOR UPDATE;
	IF cur <> expect THEN
		RAISE EXCEPTION 'herald: the stored position is %, not %: another writer committed', cur, expect
			USING ERRCODE = 'HR002';
	END IF;
	UPDATE {s}.meta m SET seq = advance.seq, tick = advance.tick WHERE m.id = 1;
END $$;
`

// SQLSTATEs raised by the functions above, and by a duplicate key.
const (
	codeFenced = "HR001"
	codeMoved  = "HR002"

	codeUniqueViolation = "23505"
)

// DefaultSchema is the schema a store lives in unless Options.Schema names another.
const DefaultSchema = "herald"

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// queries are the statements of one store, with its schema filled in.
type queries struct {
	meta, getNode, loadTypes, loadNodes, loadEdges, loadAux string
	changes, loadBody, loadBodies, seq                      string

	fence, advance, lockMeta, setMeta, readNodes, readEdges    string
	putNodes, delNodes, putEdges, delEdges, putTypes, delTypes string
	putChanges, putBodies, putDead, putAux, delAux             string
	truncChanges, truncBodies, truncDead, setHorizon           string

	acquire, renew, release, leader string
	heartbeat, nodes                string
}

func newQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	f := func(q string) string { return strings.ReplaceAll(q, "{s}", s) }
	put := func(table, key, val string) string {
		return f(fmt.Sprintf(`INSERT INTO {s}.%[1]s (%[2]s, %[3]s) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (%[2]s) DO UPDATE SET %[3]s = excluded.%[3]s`, table, key, val))
	}
	del := func(table, key string) string {
		return f(fmt.Sprintf(`DELETE FROM {s}.%s WHERE %s = ANY($1::bytea[])`, table, key))
	}
	return queries{
		meta:      f(`SELECT seq, tick, horizon FROM {s}.meta WHERE id = 1`),
		seq:       f(`SELECT seq FROM {s}.meta WHERE id = 1`),
		getNode:   f(`SELECT rec FROM {s}.nodes WHERE id = $1`),
		loadTypes: f(`SELECT rec FROM {s}.types ORDER BY name`),
		loadNodes: f(`SELECT rec FROM {s}.nodes ORDER BY id`),
		loadEdges: f(`SELECT rec FROM {s}.edges ORDER BY key`),
		loadAux:   f(`SELECT key, value FROM {s}.aux ORDER BY key`),
		// One statement, so the horizon and the log come from one snapshot.
		changes: f(`SELECT m.horizon, c.cs FROM {s}.meta m LEFT JOIN LATERAL
			(SELECT cs FROM {s}.changes WHERE seq > $1 ORDER BY seq LIMIT $2) c ON true WHERE m.id = 1`),
		loadBody: f(`SELECT data FROM {s}.bodies WHERE node = $1 AND seq = $2`),
		loadBodies: f(`SELECT t.i, b.data FROM unnest($1::bytea[], $2::bigint[]) WITH ORDINALITY AS t(node, seq, i)
			JOIN {s}.bodies b ON b.node = t.node AND b.seq = t.seq`),

		fence:     f(`SELECT {s}.fence($1)`),
		advance:   f(`SELECT {s}.advance($1, $2, $3)`),
		lockMeta:  f(`SELECT seq, tick, horizon FROM {s}.meta WHERE id = 1 FOR UPDATE`),
		setMeta:   f(`UPDATE {s}.meta SET seq = $1, tick = $2 WHERE id = 1`),
		readNodes: f(`SELECT id, rec FROM {s}.nodes WHERE id = ANY($1::bytea[])`),
		readEdges: f(`SELECT key, rec FROM {s}.edges WHERE key = ANY($1::bytea[])`),
		putNodes:  put("nodes", "id", "rec"),
		delNodes:  del("nodes", "id"),
		putEdges:  put("edges", "key", "rec"),
		delEdges:  del("edges", "key"),
		putTypes:  put("types", "name", "rec"),
		delTypes:  del("types", "name"),
		putAux:    put("aux", "key", "value"),
		delAux:    del("aux", "key"),
		// Change sets and bodies are keyed by a seq above the position, so their keys
		// are new unless another writer moved the position: a plain INSERT (cheaper
		// than an upsert) then fails, and the failure is reported as errMoved.
		putChanges: f(`INSERT INTO {s}.changes (seq, cs) SELECT * FROM unnest($1::bigint[], $2::bytea[])`),
		putBodies:  f(`INSERT INTO {s}.bodies (node, seq, data) SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[])`),
		putDead: f(`INSERT INTO {s}.dead_bodies (seq, body_seq, node) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bytea[])
			ON CONFLICT DO NOTHING`),

		truncChanges: f(`DELETE FROM {s}.changes WHERE seq <= $1`),
		truncBodies: f(`DELETE FROM {s}.bodies b USING {s}.dead_bodies d
			WHERE d.seq <= $1 AND b.node = d.node AND b.seq = d.body_seq`),
		truncDead:  f(`DELETE FROM {s}.dead_bodies WHERE seq <= $1`),
		setHorizon: f(`UPDATE {s}.meta SET horizon = $1 WHERE id = 1`),

		// Acquire always starts a new term, even for the holder itself: a restarted
		// process that reuses its name must not share a term with its past self.
		acquire: f(`UPDATE {s}.leader SET term = term + 1, holder = $1, address = $2,
				expires_at = now() + $3 * interval '1 microsecond'
			WHERE id = 1 AND (holder IS NULL OR holder = $1 OR expires_at <= now()) RETURNING term`),
		renew: f(`UPDATE {s}.leader SET expires_at = now() + $2 * interval '1 microsecond'
			WHERE id = 1 AND term = $1 AND holder IS NOT NULL RETURNING term`),
		release: f(`UPDATE {s}.leader SET holder = NULL, address = '', expires_at = now()
			WHERE id = 1 AND term = $1 AND holder IS NOT NULL`),
		leader: f(`SELECT term, coalesce(holder, ''), address, expires_at, holder IS NOT NULL AND expires_at > now()
			FROM {s}.leader WHERE id = 1`),

		heartbeat: f(`INSERT INTO {s}.cluster_nodes (name, address, role, seq, behind, seen_at) VALUES ($1, $2, $3, $4, $5, now())
			ON CONFLICT (name) DO UPDATE SET address = excluded.address, role = excluded.role, seq = excluded.seq,
				behind = excluded.behind, seen_at = excluded.seen_at`),
		nodes: f(`SELECT name, address, role, seq, behind, seen_at, extract(epoch FROM now() - seen_at)::float8
			FROM {s}.cluster_nodes ORDER BY name`),
	}
}

// migrate creates the schema and its tables if absent, and checks their version. An
// advisory lock keeps two stores opening at once from both creating them.
func migrate(ctx context.Context, tx pgx.Tx, schema string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('herald-pgstore:' || $1))`, schema); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return err
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
			return err
		}
	}
	var hasVersion bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = $1 AND tablename = 'schema_version')`, schema).Scan(&hasVersion)
	if err != nil {
		return err
	}
	version := 0
	if hasVersion {
		if err := tx.QueryRow(ctx, "SELECT version FROM "+quoted+".schema_version").Scan(&version); err != nil {
			return err
		}
	}
	switch {
	case version > schemaVersion:
		return fmt.Errorf("schema %s is at version %d; this build knows versions up to %d", schema, version, schemaVersion)
	case version == schemaVersion:
		return nil
	case hasVersion && version < 1:
		return fmt.Errorf("schema %s is at version %d, which this build cannot upgrade", schema, version)
	}
	if !hasVersion {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(schemaDDL, "{s}", quoted)); err != nil {
			return fmt.Errorf("creating the tables: %w", err)
		}
		version = 1
	}
	for ; version < schemaVersion; version++ {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(upgrades[version-1], "{s}", quoted)); err != nil {
			return fmt.Errorf("upgrading the tables to version %d: %w", version+1, err)
		}
	}
	_, err = tx.Exec(ctx, "UPDATE "+quoted+".schema_version SET version = $1", schemaVersion)
	return err
}
