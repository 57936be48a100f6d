"""Serve: answer TileLang's JIT from prebuilt libraries (no compile), the start-up hook, and verify a library against a capture."""
