"""Kernel factories by op name; modules of tlops.ops fill it when they are imported."""

KERNELS = {}


def register(name):
    def deco(factory):
        KERNELS[name] = factory
        return factory

    return deco
