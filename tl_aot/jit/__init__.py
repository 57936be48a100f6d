"""The seam with TileLang's JIT: resolving user code, capture, serving, verify."""
