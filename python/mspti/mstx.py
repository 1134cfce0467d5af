"""MSTX from Python: marks and ranges, optionally on a device stream.

A stream is a ``mspti.npusim.Stream``, an int handle, or None (host only).
With a stream, msPTI also records when the device reached that point.
"""

import contextlib

from . import _mspti

__all__ = ["mark", "range_start", "range_end", "range", "Domain"]


def mark(message, stream=None):
    """An instantaneous marker."""
    _mspti.mstx_mark(message, stream)


def range_start(message, stream=None):
    """Starts a range; returns its id (0 if nothing was recorded)."""
    return _mspti.mstx_range_start(message, stream)


def range_end(range_id):
    """Ends the range started with range_start (0 is ignored)."""
    _mspti.mstx_range_end(range_id)


@contextlib.contextmanager
def range(message, stream=None):  # noqa: A001 - mirrors the MSTX name
    """``with mspti.mstx.range("step"):`` brackets a block in a range."""
    rid = range_start(message, stream)
    try:
        yield rid
    finally:
        range_end(rid)


class Domain:
    """A named MSTX domain (mstxDomainCreateA)."""

    def __init__(self, name):
        self.name = name
        self.handle = _mspti.mstx_domain_create(name)

    def mark(self, message, stream=None):
        _mspti.mstx_domain_mark(self.handle, message, stream)

    def range_start(self, message, stream=None):
        return _mspti.mstx_domain_range_start(self.handle, message, stream)

    def range_end(self, range_id):
        _mspti.mstx_domain_range_end(self.handle, range_id)

    @contextlib.contextmanager
    def range(self, message, stream=None):
        rid = self.range_start(message, stream)
        try:
            yield rid
        finally:
            self.range_end(rid)

    def destroy(self):
        if self.handle:
            _mspti.mstx_domain_destroy(self.handle)
            self.handle = 0
