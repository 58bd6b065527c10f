package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Commits write through pgconn's pipeline directly, rather than a pgx.Batch, for two
// reasons. A pgx.Batch cannot ask the server to send its results before the Sync, and
// PostgreSQL holds them back until then, so CommitAsync could not return before the
// commit and the next group could not run while this one syncs. And the parameters,
// arrays of a few hundred elements, are cheaper to encode here, in PostgreSQL's binary
// format, than through pgx's generic encoders.

// stmt is one statement of a pipeline, with its parameters in binary format.
type stmt struct {
	sql    string
	params [][]byte
}

// binaryFormats marks every parameter of a statement as binary.
var binaryFormats = []int16{1, 1, 1, 1}

// Type OIDs of array elements.
const (
	oidBytea = 17
	oidInt8  = 20
)

func int8Param(v int64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)) }

// arrayHeader starts a one-dimensional array of n elements without nulls.
func arrayHeader(buf []byte, oid uint32, n int) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // no nulls
	buf = binary.BigEndian.AppendUint32(buf, oid)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1) // lower bound
}

func byteaArray(elems [][]byte) []byte {
	size := 20
	for _, e := range elems {
		size += 4 + len(e)
	}
	buf := arrayHeader(make([]byte, 0, size), oidBytea, len(elems))
	for _, e := range elems {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(e)))
		buf = append(buf, e...)
	}
	return buf
}

func int8Array(elems []int64) []byte {
	buf := arrayHeader(make([]byte, 0, 20+12*len(elems)), oidInt8, len(elems))
	for _, e := range elems {
		buf = binary.BigEndian.AppendUint32(buf, 8)
		buf = binary.BigEndian.AppendUint64(buf, uint64(e))
	}
	return buf
}

// sendPipeline sends stmts as one pipeline closed by a Sync, and reads their results.
// With flush the server sends those results before it processes the Sync, so that
// sendPipeline returns as soon as the statements have run, and syncDone then reads the
// answer to the Sync: for an implicit transaction, its commit. The statements are
// prepared on conn the first time.
func sendPipeline(ctx context.Context, conn *pgx.Conn, stmts []stmt, flush bool) (*pgconn.Pipeline, error) {
	sds := make([]*pgconn.StatementDescription, len(stmts))
	for i, st := range stmts {
		sd, err := conn.Prepare(ctx, st.sql, st.sql)
		if err != nil {
			return nil, err
		}
		sds[i] = sd
	}
	pl := conn.PgConn().StartPipeline(ctx)
	for i, st := range stmts {
		pl.SendQueryStatement(sds[i], st.params, binaryFormats[:len(st.params)], nil)
	}
	if flush {
		pl.SendFlushRequest()
	}
	if err := pl.Sync(); err != nil {
		_ = pl.Close()
		return nil, err
	}
	for range stmts {
		res, err := pl.GetResults()
		if rr, ok := res.(*pgconn.ResultReader); ok && err == nil {
			_, err = rr.Close()
		} else if err == nil {
			err = fmt.Errorf("unexpected pipeline result %T", res)
		}
		if err != nil {
			_ = pl.Close() // reads on to the Sync: the transaction has rolled back
			return nil, err
		}
	}
	return pl, nil
}

// syncDone reads the answer to a pipeline's Sync and ends the pipeline.
func syncDone(pl *pgconn.Pipeline) error {
	res, err := pl.GetResults()
	if _, ok := res.(*pgconn.PipelineSync); !ok && err == nil {
		err = fmt.Errorf("unexpected pipeline result %T", res)
	}
	if cerr := pl.Close(); err == nil {
		err = cerr
	}
	return err
}
