"""The kernel lock: the sha256 of every expanded kernel, committed beside (not inside) generated/.

Any change of an expanded payload, whether from a template, a YAML family or the generator itself,
makes `gen` and `gen --check` fail until someone reviews it and runs `gen --update-lock`. The lock
lives outside generated/ so it is neither an orphan there nor shipped as package data.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["LOCK_PATH", "lock_problems", "render_lock"]

LOCK_PATH = Path("py_runtime/kernels/kernels.lock.json")
_UPDATE_HINT = "review the change, then run `webgpu-llm-lab gen --update-lock`"


def render_lock(hashes: dict[str, str]) -> bytes:
    """The lock file's exact bytes: {kernel name: sha256 of its expanded .wgsl}, sorted."""
    return (json.dumps(dict(sorted(hashes.items())), indent=1) + "\n").encode()


def _read_lock(root: Path) -> tuple[dict[str, str], list[str]]:
    path = root / LOCK_PATH
    rel = LOCK_PATH.as_posix()
    if not path.exists():
        return {}, [f"{rel}: missing"]
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        return {}, [f"{rel}:{error.lineno}: not valid JSON ({error.msg})"]
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return {}, [f"{rel}:1: must be a JSON object of kernel name -> sha256 hex"]
    return data, []


def lock_problems(root: Path, hashes: dict[str, str]) -> list[str]:
    """One message per kernel whose payload hash differs from, is missing from, or is extra in the lock."""
    locked, problems = _read_lock(root)
    rel = LOCK_PATH.as_posix()
    for name in sorted(set(hashes) | set(locked)):
        if name not in locked:
            problems.append(f"lock: kernel {name!r} is missing from {rel} (sha256 {hashes[name][:12]}…)")
        elif name not in hashes:
            problems.append(f"lock: kernel {name!r} is in {rel} but no longer generated")
        elif locked[name] != hashes[name]:
            problems.append(f"lock: kernel {name!r} payload changed: sha256 {hashes[name][:12]}…, "
                            f"locked {locked[name][:12]}…")
    if problems:
        problems.append(f"lock: {_UPDATE_HINT}")
    return problems
