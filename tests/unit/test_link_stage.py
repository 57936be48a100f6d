"""The link stage's manifest: the launcher's, completed with the image sizes (no second manifest made)."""

from __future__ import annotations

from dataclasses import replace

from support.golden import golden_manifest

from tl_aot.codegen.render import image_symbol
from tl_aot.pipeline.link import with_image_sizes


def test_the_link_stage_completes_the_launchers_manifest_with_the_image_sizes():
    """The link stage takes the manifest the launcher was rendered from and fills in the sizes: the manifest made afresh."""
    m = golden_manifest()
    images = {image_symbol(e.name, v.arch): (v.arch, bytes(v.image_bytes)) for e in m.entries for v in e.variants}
    assert any(v.image_bytes for e in m.entries for v in e.variants)
    unsized = replace(m, entries=tuple(replace(e, variants=tuple(replace(v, image_bytes=0) for v in e.variants)) for e in m.entries))
    assert with_image_sizes(unsized, images) == m
