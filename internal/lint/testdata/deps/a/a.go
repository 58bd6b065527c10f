package a

import _ "example.com/m/b"
