"""The embedded engine: runs a program's IR in-process, tick by tick (see ``runtime``)."""

from blooml.engine.runtime import Runtime

__all__ = ["Runtime"]
