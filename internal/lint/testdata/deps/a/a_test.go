package a

import _ "example.com/m/d"
