"""Tuning: an ``@autotune`` config chosen ahead of time (tuner, its record, the build's choice) or at run time, answered."""
