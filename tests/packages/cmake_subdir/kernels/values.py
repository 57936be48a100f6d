ONE = 1.0
