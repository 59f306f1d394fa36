"""The GPU host's wheel list (scripts/gpu_host_wheels.sh) agrees with pyproject.toml's pin of wgpu
and with docs/GPU_HOST.md, so the documented workflow installs what the code was tested with."""

from __future__ import annotations

import re


def _script_pins(repo) -> dict[str, str]:
    text = (repo / "scripts/gpu_host_wheels.sh").read_text()
    block = text[text.index("wheels=("):text.index(")\n", text.index("wheels=("))]
    return dict(re.findall(r"^\s+([A-Za-z0-9_.-]+)==(\S+)", block, re.MULTILINE))


def test_the_carried_wgpu_is_the_one_pyproject_pins(repo):
    pinned = re.search(r'"wgpu==([^"]+)"', (repo / "pyproject.toml").read_text()).group(1)
    assert _script_pins(repo)["wgpu"] == pinned


def test_the_doc_lists_exactly_the_carried_wheels(repo):
    pins = _script_pins(repo)
    assert set(pins) == {"wgpu", "cffi", "pycparser", "rendercanvas"}, pins
    table_row = next(line for line in (repo / "docs/GPU_HOST.md").read_text().splitlines()
                     if line.startswith("| `.whl/`"))
    assert dict(re.findall(r"`([A-Za-z0-9_.-]+)==([^`]+)`", table_row)) == pins
