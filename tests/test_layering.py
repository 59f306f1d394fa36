"""The import direction: each layer imports only the layers below it, so the folders show the data
flow. A module's layer is its package (or top-level module) in LAYERS; host/ (the CLI, the oracle)
sits above everything and is not listed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "py_runtime"
# Bottom first. A module may import its own layer and any layer before it.
LAYERS = [
    # plain data: model geometry (and a checkpoint's), the kernel registry, tokenizers, checkpoint readers
    {"models.config", "models.checkpoint_config", "kernels", "text", "checkpoints"},
    {"gpu", "tensors", "params", "caches", "profiling", "routes"},
    {"dispatch", "routing"},                            # the vocabulary plans and ops share
    {"plan", "runtime", "oneshot"},
    {"ops"},
    # A decoder builds its plan from ops; its geometry (models.config) stays plain data at the bottom.
    {"models.decoder", "models.weights", "models.checkpoint_weights"},
    {"checks"},
    {"workloads"},
    {"app", "page"},
]


def _layer(module: str) -> int | None:
    for depth, names in enumerate(LAYERS):
        if any(module == name or module.startswith(name + ".") for name in names):
            return depth
    return None


def _imports(path: Path) -> set[str]:
    """The py_runtime modules a file imports (relative imports resolved)."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            found |= {target} if node.module else {f"{target}.{a.name}".lstrip(".") for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("py_runtime."):
            found.add(node.module.removeprefix("py_runtime."))
    return found


def test_every_module_imports_only_its_own_layer_and_those_below():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        own = _layer(module)
        if own is None:
            continue
        for target in _imports(path):
            depth = _layer(target)
            if depth is not None and depth > own:
                upward.append(f"{module} (layer {own}) imports {target} (layer {depth})")
    assert upward == []


def test_the_model_config_imports_nothing_of_the_runtime():
    assert _imports(PACKAGE / "models" / "config.py") == set()


def test_the_tokenizer_imports_only_itself():
    text = PACKAGE / "text"
    outside = {f"{path.name}: {target}" for path in sorted(text.glob("*.py"))
               for target in _imports(path) if not (target == "text" or target.startswith("text."))}
    assert outside == set()
