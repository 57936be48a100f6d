"""tl_packs: TileLang kernels whose images come in one wheel per arch (tl_packs[sm80], tl_packs[sm90a])."""

from ._kernels import *  # noqa: F403  add_one, add_one_again, scale
