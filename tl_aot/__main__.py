"""Entry point of ``python -m tl_aot``."""

import sys

from .cli import main

sys.exit(main())
