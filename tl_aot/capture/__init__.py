"""Capture: record every compile TileLang's JIT is asked for while a program runs, and read the record back for a build."""
