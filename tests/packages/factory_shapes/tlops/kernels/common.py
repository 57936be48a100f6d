"""Config objects and dtype helpers the factories take, as operator libraries pass them."""

import enum
from dataclasses import dataclass
from typing import NamedTuple

import torch

TORCH_TO_TL = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def tl_dtype(dtype):
    """A torch dtype or a TileLang dtype name, as the TileLang dtype string."""
    return TORCH_TO_TL.get(dtype, dtype)


class Act(enum.Enum):
    NONE = 0
    RELU = 1


@dataclass(frozen=True)
class TileConfig:
    block: int = 128
    threads: int = 128


class Problem(NamedTuple):
    rows: int
    cols: int
