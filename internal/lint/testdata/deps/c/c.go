package c

import _ "fmt"
