"""What to build, checked once: entries (``KernelSpec``), libraries, spec files, arch precedence, values, options."""
