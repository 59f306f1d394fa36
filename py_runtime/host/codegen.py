"""Kernel codegen: shaders/**/*.wgsl (+ sibling YAML families) -> py_runtime/kernels/generated/.

A `.wgsl` with a sibling `.yaml` of the same stem is a template expanded once per variant; any
other `.wgsl` is used verbatim. Every output is rendered in memory first; only then is anything
compared (`--check`) or written. Outputs carry their source in a header line, and the registry
records each kernel's parameters, entry point, workgroup size, bindings and sha256.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from .templates import TemplateError, render, uses_template_syntax
from .wgsl_meta import WgslMetaError, parse_kernel_meta

__all__ = ["CodegenError", "Generated", "generate", "check", "publish", "repo_root"]

GENERATED_DIR = Path("py_runtime/kernels/generated")
REGISTRY_NAME = "registry.json"
_FAMILY_KEYS = {"parameter_names_with_default_values", "generate_variant_forall", "shader_variants"}


class CodegenError(Exception):
    """One or more problems, each naming a file (and a line where there is one)."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True)
class Generated:
    outputs: dict[Path, bytes]      # repo-relative path -> exact bytes
    kernels: dict[str, dict]        # registry entries by kernel name


def repo_root(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "shaders").is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    raise CodegenError([f"no repository root (a folder with shaders/ and pyproject.toml) above {here}"])


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys, naming the line."""


def _construct_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_family(path: Path, rel: str) -> dict:
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise CodegenError([f"{rel}{line}: {getattr(error, 'problem', None) or error}"]) from None
    if not isinstance(data, dict) or list(data) != [path.stem]:
        found = list(data) if isinstance(data, dict) else type(data).__name__
        raise CodegenError([f"{rel}:1: the only top-level key must be {path.stem!r} (the file stem), found {found}"])
    family = data[path.stem] or {}
    unknown = sorted(set(family) - _FAMILY_KEYS)
    if unknown:
        raise CodegenError([f"{rel}: unknown key(s) {unknown}; allowed: {sorted(_FAMILY_KEYS)}"])
    return family


def _variants(family: dict, rel: str) -> list[tuple[str, dict]]:
    """(name, params) for every variant: shader_variants x the product of generate_variant_forall."""
    defaults = dict(family.get("parameter_names_with_default_values") or {})
    axes = []
    for param, choices in (family.get("generate_variant_forall") or {}).items():
        if param == "combination":
            names = choices.get("parameter_names") or []
            options = [(dict(zip(names, c["parameter_values"])), str(c.get("suffix", ""))) for c in choices["combos"]]
        else:
            if param not in defaults:
                raise CodegenError([f"{rel}: generate_variant_forall names unknown parameter {param!r}"])
            options = [({param: c["VALUE"]}, str(c.get("SUFFIX", c["VALUE"]))) for c in choices]
        axes.append(options)
    variants = []
    for entry in family.get("shader_variants") or []:
        if "NAME" not in entry:
            raise CodegenError([f"{rel}: a shader_variants entry has no NAME: {entry}"])
        unknown = sorted(set(entry) - set(defaults) - {"NAME"})
        if unknown:
            raise CodegenError([f"{rel}: variant {entry['NAME']!r} sets unknown parameter(s) {unknown}"])
        for combo in itertools.product(*axes):
            params = {**defaults, **{k: v for k, v in entry.items() if k != "NAME"}}
            suffixes = []
            for values, suffix in combo:
                params.update(values)
                if suffix:
                    suffixes.append(suffix)
            variants.append(("_".join([entry["NAME"], *suffixes]), params))
    return variants


def _header(source: str, name: str) -> str:
    return f"// Generated by `webgpu-llm-lab gen` from {source} (kernel {name}). Do not edit.\n"


def generate(root: Path) -> Generated:
    """Render every kernel and the registry in memory. Raises CodegenError listing all problems."""
    problems: list[str] = []
    kernels: dict[str, dict] = {}
    outputs: dict[Path, bytes] = {}
    texts: dict[str, str] = {}
    for path in sorted((root / "shaders").rglob("*.wgsl")):
        rel = path.relative_to(root).as_posix()
        template = path.read_text()
        family_path = path.with_suffix(".yaml")
        try:
            if family_path.exists():
                variants = _variants(_load_family(family_path, family_path.relative_to(root).as_posix()), rel)
                rendered = [(name, params, render(template, params, path=rel)) for name, params in variants]
            else:
                line = uses_template_syntax(template)
                if line is not None:
                    raise CodegenError([f"{rel}:{line}: '$' template syntax in a file without a sibling .yaml"])
                rendered = [(path.stem, {}, template)]
        except (CodegenError, TemplateError) as error:
            problems.extend(error.problems if isinstance(error, CodegenError) else [str(error)])
            continue
        for name, params, body in rendered:
            if name in kernels:
                problems.append(f"{rel}: kernel name {name!r} also generated from {kernels[name]['source']}")
                continue
            text = _header(rel, name) + body
            try:
                meta = parse_kernel_meta(text, where=f"{rel} ({name})")
            except WgslMetaError as error:
                problems.append(str(error))
                continue
            out = GENERATED_DIR / f"{name}.wgsl"
            if out in outputs or out.name == REGISTRY_NAME:
                problems.append(f"{rel}: output path {out} collides with another output")
                continue
            outputs[out] = text.encode()
            texts[name] = text
            kernels[name] = {
                "source": rel, "file": out.name, "params": params, **meta,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
            }
    if problems:
        raise CodegenError(problems)
    registry = {"generator": "webgpu-llm-lab gen", "kernels": dict(sorted(kernels.items()))}
    outputs[GENERATED_DIR / REGISTRY_NAME] = (json.dumps(registry, indent=1, sort_keys=True) + "\n").encode()
    return Generated(outputs=outputs, kernels=kernels)


def _orphans(root: Path, generated: Generated) -> list[str]:
    folder = root / GENERATED_DIR
    present = sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []
    return [p.relative_to(root).as_posix() for p in present if p.relative_to(root) not in generated.outputs]


def check(root: Path, generated: Generated) -> list[str]:
    """Missing, stale and orphaned outputs, as sorted messages; writes nothing."""
    issues = []
    for rel, data in sorted(generated.outputs.items()):
        path = root / rel
        if not path.exists():
            issues.append(f"missing: {rel.as_posix()}")
        elif path.read_bytes() != data:
            issues.append(f"stale: {rel.as_posix()}")
    issues += [f"orphaned (no source): {rel}" for rel in _orphans(root, generated)]
    return issues


def publish(root: Path, generated: Generated) -> list[Path]:
    """Write the outputs that differ; returns what was written. Orphans block publication."""
    orphans = _orphans(root, generated)
    if orphans:
        raise CodegenError([f"orphaned output (no source), remove it by hand: {rel}" for rel in orphans])
    written = []
    for rel, data in sorted(generated.outputs.items()):
        path = root / rel
        if path.exists() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(rel)
    return written
