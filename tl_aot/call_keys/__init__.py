"""Call keys: a ``@tilelang.jit`` call named from the call alone (function, what it reads, arguments, GPU), before any trace."""
