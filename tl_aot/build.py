"""``tl_aot.build.build_library``: one build, plan to publish, at its public path (it lives in ``pipeline/``)."""

__all__ = ["build_library"]  # noqa: F822 (given by __getattr__)


def __getattr__(name: str):
    """Load the pipeline only when it is asked for: importing ``tl_aot.build`` stays cheap."""
    if name in __all__:
        from .pipeline import library

        return getattr(library, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
