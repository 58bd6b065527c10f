package client

import (
	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/server"
)

var _ herald.Value
var _ = server.New
