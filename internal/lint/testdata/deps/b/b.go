package b

import _ "example.com/m/c"
