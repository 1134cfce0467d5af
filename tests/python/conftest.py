"""Shared fixtures of the mspti tests: they run against the build tree
(tests/python/run.sh sets PYTHONPATH, LD_PRELOAD and the shm prefix)."""

import os
import subprocess
import sys

import pytest

BUILDDIR = os.environ.get("MSPTI_TEST_BUILDDIR", "")
SRCDIR = os.environ.get("MSPTI_TEST_SRCDIR", "")


@pytest.fixture
def builddir():
    if not BUILDDIR:
        pytest.skip("run through make check (tests/python/run.sh)")
    return BUILDDIR


@pytest.fixture
def srcdir():
    if not SRCDIR:
        pytest.skip("run through make check (tests/python/run.sh)")
    return SRCDIR


def run_python(code_or_args, timeout=120, env=None):
    """Runs python3 in a child with the test environment; returns the
    CompletedProcess (text)."""
    args = [sys.executable]
    if isinstance(code_or_args, str):
        args += ["-c", code_or_args]
    else:
        args += list(code_or_args)
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, env=e)
