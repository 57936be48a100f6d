from . import elementwise  # noqa: F401  (registers its kernels)
