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


class VendoredTokenizers:
    """The vendored tokenizer.json files (scripts/setup.sh fetches them), each parsed, loaded by the pure-
    Python tokenizer and by the `tokenizers` reference once per session: loading Llama 3.2's costs ~1 s."""

    def __init__(self, root: Path):
        self.root = root
        self._loaded: dict = {}

    def path(self, name: str) -> Path:
        from py_runtime.host.vendor import tokenizer_dir

        return tokenizer_dir(self.root, name) / "tokenizer.json"

    def _load(self, name: str) -> tuple:
        if name not in self._loaded:
            import json

            from py_runtime.host.oracle.tokenizer import reference_tokenizer
            from py_runtime.text import Tokenizer

            spec = json.loads(self.path(name).read_bytes())
            self._loaded[name] = (spec, Tokenizer(spec), reference_tokenizer(self.path(name)))
        return self._loaded[name]

    def spec(self, name: str) -> dict:
        """The parsed tokenizer.json (shared: copy before changing it)."""
        return self._load(name)[0]

    def ours(self, name: str):
        return self._load(name)[1]

    def reference(self, name: str):
        return self._load(name)[2]


@pytest.fixture(scope="session")
def vendored_tokenizers() -> VendoredTokenizers:
    return VendoredTokenizers(REPO)
