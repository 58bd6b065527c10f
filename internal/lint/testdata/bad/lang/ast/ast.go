package ast

import "github.com/herald-mq/herald/lang/token"

var _ token.Pos
