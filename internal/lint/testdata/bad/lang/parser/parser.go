package parser

import (
	"strings"

	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/lang/ast"
)

var _ = strings.TrimSpace
var _ = engine.Open
var _ ast.Node
