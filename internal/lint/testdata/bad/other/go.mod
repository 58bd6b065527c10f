module example.com/other
