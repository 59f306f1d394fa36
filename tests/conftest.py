"""Fixtures shared by the host tests: the repo root and one native (wgpu on Vulkan) runtime."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def native_runtime():
    from py_runtime.runtime import Runtime

    return asyncio.run(Runtime.create("native"))
