package memstore_test

import (
	"testing"

	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Backend { return memstore.New() },
	})
}
