"""The seam with TileLang's JIT: the one interception, resolving a user's object to its compile request, and request keys."""
