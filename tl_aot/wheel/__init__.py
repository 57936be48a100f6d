"""Wheel platform tags: symbol versions, manylinux policies, the check."""
