"""The front ends: the command line and the setuptools command."""
