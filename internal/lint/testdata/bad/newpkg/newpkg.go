package newpkg

import "github.com/herald-mq/herald"

var _ herald.Value
