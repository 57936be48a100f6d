"""The generated C++ and Python: the launcher, its tables and the torch companion."""
