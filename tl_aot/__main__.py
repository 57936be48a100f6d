"""Entry point of ``python -m tl_aot``."""

import sys

from .frontends.cli import main

sys.exit(main())
