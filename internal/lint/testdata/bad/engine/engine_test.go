package engine

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/herald-mq/herald/internal/testutil"
	"github.com/herald-mq/herald/store/memstore"
)

func TestKits(t *testing.T) { _, _, _ = rapid.Int, testutil.BuildBinary, memstore.New }
