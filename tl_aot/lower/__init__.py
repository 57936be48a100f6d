"""TileLang (and CuTeDSL) lowering: prim_func -> metadata + device code."""
