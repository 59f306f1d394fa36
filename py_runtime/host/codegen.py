"""Kernel codegen: shaders/**/*.wgsl (+ sibling YAML families) -> py_runtime/kernels/generated/.

A `.wgsl` with a sibling `.yaml` of the same stem is a template expanded once per variant; any
other `.wgsl` is used verbatim. Every output is rendered and validated in memory first (YAML
shape, template syntax, kernel names, collisions, WGSL metadata; every problem names its file
and, where known, its line); only then is anything compared (`--check`) or published, as one
transaction (publish.py). Outputs carry their source in a header line, the registry records each
kernel's template values, tier, entry point, workgroup size, bindings, params layout and sha256,
and the lock (kernel_lock.py) pins those hashes so a changed payload needs a deliberate
`gen --update-lock`.

A family's YAML: `parameter_names_with_default_values`, `generate_variant_forall` (axes whose
product names each variant NAME_suffix...) and `shader_variants` (entries: NAME, parameter
overrides, an entry's own `generate_variant_forall`, and `sweep`: the suffixes of that entry's
variants that only benchmark sweeps run). Every variant is tier "shipped" (a route may pick it)
unless its entry lists it under `sweep`; sweep kernels are generated and loadable all the same.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .kernel_lock import LOCK_PATH, lock_problems, render_lock
from .publish import FileOps, PublishError, publish_files, stale_temporaries
from .templates import TemplateError, render, uses_template_syntax
from .wgsl_meta import WgslMetaError, parse_kernel_meta

__all__ = ["CodegenError", "Generated", "generate", "check", "publish", "repo_root", "LOCK_PATH"]

GENERATED_DIR = Path("py_runtime/kernels/generated")
REGISTRY_NAME = "registry.json"
_FAMILY_KEYS = {"parameter_names_with_default_values", "generate_variant_forall", "shader_variants"}
_ENTRY_KEYS = ("NAME", "generate_variant_forall", "sweep")     # a shader_variants entry's own keys
_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CodegenError(Exception):
    """One or more problems, each naming a file (and a line where there is one)."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True)
class Generated:
    outputs: dict[Path, bytes]      # repo-relative path -> exact bytes
    kernels: dict[str, dict]        # registry entries by kernel name

    @property
    def hashes(self) -> dict[str, str]:
        """sha256 of each kernel's expanded .wgsl, by kernel name (what the lock pins)."""
        return {name: entry["sha256"] for name, entry in self.kernels.items()}


def repo_root(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "shaders").is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    raise CodegenError([f"no repository root (a folder with shaders/ and pyproject.toml) above {here}"])


class _LocatedDict(dict):
    """A YAML mapping that remembers its 1-based line, so errors can point at it."""

    line = 1


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
    mapping = _LocatedDict(yaml.SafeLoader.construct_mapping(loader, node, deep))
    mapping.line = node.start_mark.line + 1
    return mapping


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _at(rel: str, node) -> str:
    return f"{rel}:{node.line}" if isinstance(node, _LocatedDict) else rel


def _load_family(path: Path, rel: str) -> dict:
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise CodegenError([f"{rel}{line}: {getattr(error, 'problem', None) or error}"]) from None
    if not isinstance(data, dict) or list(data) != [path.stem]:
        found = list(data) if isinstance(data, dict) else type(data).__name__
        where = _at(rel, data) if isinstance(data, _LocatedDict) else f"{rel}:1"
        raise CodegenError([f"{where}: the only top-level key must be {path.stem!r} (the file stem), found {found}"])
    family = data[path.stem] or _LocatedDict()
    if not isinstance(family, dict):
        raise CodegenError([f"{_at(rel, data)}: {path.stem!r} must be a mapping, found {type(family).__name__}"])
    unknown = sorted(set(family) - _FAMILY_KEYS)
    if unknown:
        raise CodegenError([f"{_at(rel, family)}: unknown key(s) {unknown}; allowed: {sorted(_FAMILY_KEYS)}"])
    return family


def _expect(value, kind, what: str, where: str):
    if not isinstance(value, kind):
        raise CodegenError([f"{where}: {what} must be a {'mapping' if kind is dict else 'list'}, "
                            f"found {type(value).__name__}"])
    return value


def _axis(param: str, choices, defaults: dict, rel: str, where: str) -> list[tuple[dict, str]]:
    """One generate_variant_forall axis as (parameter values, name suffix) options."""
    if param == "combination":
        _expect(choices, dict, "combination", where)
        names = _expect(choices.get("parameter_names") or [], list, "combination.parameter_names", where)
        unknown = sorted(set(names) - set(defaults))
        if unknown:
            raise CodegenError([f"{_at(rel, choices)}: combination names unknown parameter(s) {unknown}"])
        options = []
        for combo in _expect(choices.get("combos") or [], list, "combination.combos", where):
            values = _expect(combo, dict, "a combos entry", where).get("parameter_values")
            if not isinstance(values, list) or len(values) != len(names):
                raise CodegenError([f"{_at(rel, combo)}: parameter_values must list {len(names)} value(s)"])
            options.append((dict(zip(names, values)), str(combo.get("suffix", ""))))
        return options
    if param not in defaults:
        raise CodegenError([f"{where}: generate_variant_forall names unknown parameter {param!r}"])
    options = []
    for choice in _expect(choices, list, f"generate_variant_forall.{param}", where):
        if not isinstance(choice, dict) or "VALUE" not in choice:
            raise CodegenError([f"{_at(rel, choice)}: each {param} choice needs a VALUE"])
        options.append(({param: choice["VALUE"]}, str(choice.get("SUFFIX", choice["VALUE"]))))
    return options


def _axes(forall, defaults: dict, rel: str, where: str) -> list:
    forall = _expect(forall or {}, dict, "generate_variant_forall", where)
    return [_axis(param, choices, defaults, rel, _at(rel, forall)) for param, choices in forall.items()]


def _sweep_suffixes(entry: dict, suffixes: list[str], rel: str) -> set[str]:
    """The entry's `sweep` list, checked: each item one of the suffixes its variants have, listed once."""
    if "sweep" not in entry:
        return set()
    where, name = _at(rel, entry), entry["NAME"]
    listed = entry["sweep"]
    if not isinstance(listed, list) or not all(isinstance(s, (str, int)) and not isinstance(s, bool) for s in listed):
        raise CodegenError([f"{where}: variant {name!r}: sweep must be a list of variant suffixes, found {listed!r}"])
    listed = [str(s) for s in listed]
    twice = sorted({s for s in listed if listed.count(s) > 1})
    unknown = [s for s in listed if s not in suffixes]
    problems = [f"{where}: variant {name!r}: sweep lists {twice} more than once"] * bool(twice) + \
               [f"{where}: variant {name!r}: sweep names suffix(es) {unknown} it does not generate; "
                f"its suffixes: {suffixes}"] * bool(unknown)
    if problems:
        raise CodegenError(problems)
    return set(listed)


def _variants(family: dict, rel: str) -> list[tuple[str, dict, str, str]]:
    """(name, template values, where, tier) for every variant: shader_variants x the product of
    generate_variant_forall (the family's, or the entry's own where it has one: a variant used with
    fewer shapes); tier "sweep" for the suffixes the entry lists under `sweep`, else "shipped"."""
    where = _at(rel, family)
    defaults = dict(_expect(family.get("parameter_names_with_default_values") or {}, dict,
                            "parameter_names_with_default_values", where))
    reserved = sorted(set(defaults) & set(_ENTRY_KEYS))
    if reserved:
        raise CodegenError([f"{where}: parameter name(s) {reserved} are shader_variants keys; rename them"])
    family_axes = _axes(family.get("generate_variant_forall"), defaults, rel, where)
    variants = []
    for entry in _expect(family.get("shader_variants") or [], list, "shader_variants", where):
        if not isinstance(entry, dict) or "NAME" not in entry:
            raise CodegenError([f"{_at(rel, entry)}: a shader_variants entry has no NAME: {entry}"])
        unknown = sorted(set(entry) - set(defaults) - set(_ENTRY_KEYS))
        if unknown:
            raise CodegenError([f"{_at(rel, entry)}: variant {entry['NAME']!r} sets unknown parameter(s) {unknown}"])
        axes = family_axes if "generate_variant_forall" not in entry else \
            _axes(entry["generate_variant_forall"], defaults, rel, _at(rel, entry))
        expansions = []
        for combo in itertools.product(*axes):
            values = {**defaults, **{k: v for k, v in entry.items() if k not in _ENTRY_KEYS}}
            suffixes = []
            for axis_values, suffix in combo:
                values.update(axis_values)
                if suffix:
                    suffixes.append(suffix)
            expansions.append(("_".join(suffixes), values))
        sweep = _sweep_suffixes(entry, [suffix for suffix, _ in expansions], rel)
        for suffix, values in expansions:
            name = "_".join(filter(None, [str(entry["NAME"]), suffix]))
            variants.append((name, values, _at(rel, entry), "sweep" if suffix in sweep else "shipped"))
    return variants


def _header(source: str, name: str) -> str:
    return f"// Generated by `webgpu-llm-lab gen` from {source} (kernel {name}). Do not edit.\n"


_INCLUDE = re.compile(r"^([ \t]*)\$include[ \t]+(\S+)[ \t]*$")


def _with_includes(root: Path, template: str, rel: str) -> str:
    """Each `$include NAME` line replaced by shaders/include/NAME (a .wgsli piece several kernels share: not a
    kernel itself), indented as the line is."""
    lines = []
    for number, line in enumerate(template.splitlines(keepends=True), 1):
        match = _INCLUDE.match(line.rstrip("\n"))
        if not match:
            lines.append(line)
            continue
        indent, name = match.groups()
        piece = root / "shaders" / "include" / name
        if piece.suffix != ".wgsli" or not piece.is_file():
            raise CodegenError([f"{rel}:{number}: $include {name}: no shaders/include/{name} (a .wgsli file)"])
        lines += [indent + text if text.strip() else text for text in piece.read_text().splitlines(keepends=True)]
    return "".join(lines)


def _expand(root: Path, path: Path, rel: str) -> list[tuple[str, dict, str, str, str]]:
    """(kernel name, template values, body, where, tier) for one .wgsl: every variant of a family, or
    the file as is (shipped)."""
    try:
        template = _with_includes(root, path.read_text(), rel)
    except UnicodeDecodeError as error:
        raise CodegenError([f"{rel}: not UTF-8 ({error.reason} at byte {error.start})"]) from None
    family_path = path.with_suffix(".yaml")
    if family_path.exists():
        family_rel = family_path.relative_to(root).as_posix()
        variants = _variants(_load_family(family_path, family_rel), family_rel)
        return [(name, values, render(template, values, path=rel), where, tier)
                for name, values, where, tier in variants]
    line = uses_template_syntax(template)
    if line is not None:
        raise CodegenError([f"{rel}:{line}: '$' template syntax in a file without a sibling .yaml"])
    return [(path.stem, {}, template, rel, "shipped")]


def generate(root: Path) -> Generated:
    """Render every kernel and the registry in memory. Raises CodegenError listing all problems."""
    problems: list[str] = []
    kernels: dict[str, dict] = {}
    outputs: dict[Path, bytes] = {}
    origin: dict[str, str] = {}                 # kernel name -> where it was declared
    output_owner: dict[str, tuple[Path, str]] = {}  # case-folded file name -> (output, where)
    for path in sorted((root / "shaders").rglob("*.wgsl")):
        rel = path.relative_to(root).as_posix()
        try:
            rendered = _expand(root, path, rel)
        except (CodegenError, TemplateError) as error:
            problems.extend(error.problems if isinstance(error, CodegenError) else [str(error)])
            continue
        for name, values, body, where, tier in rendered:
            if not _KERNEL_NAME.fullmatch(name):
                problems.append(f"{where}: kernel name {name!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)")
                continue
            if name in origin:
                problems.append(f"{where}: kernel name {name!r} also generated by {origin[name]}")
                continue
            out = GENERATED_DIR / f"{name}.wgsl"
            # Case-insensitive file systems (macOS, Windows) would merge these into one file.
            owner = output_owner.get(out.name.casefold())
            if owner is not None:
                problems.append(f"{where}: output path {out.as_posix()} collides with {owner[0].as_posix()} from {owner[1]}")
                continue
            origin[name] = where
            output_owner[out.name.casefold()] = (out, where)
            text = _header(rel, name) + body
            try:
                meta = parse_kernel_meta(text, where=f"{rel} ({name})")
            except WgslMetaError as error:
                problems.append(str(error))
                continue
            outputs[out] = text.encode()
            kernels[name] = {
                "source": rel, "file": out.name, "template_values": values, "tier": tier, **meta,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
            }
    if problems:
        raise CodegenError(problems)
    registry = {"generator": "webgpu-llm-lab gen", "kernels": dict(sorted(kernels.items()))}
    outputs[GENERATED_DIR / REGISTRY_NAME] = (json.dumps(registry, indent=1, sort_keys=True) + "\n").encode()
    return Generated(outputs=outputs, kernels=kernels)


def _leftover_temporaries(root: Path, generated: Generated) -> list[Path]:
    destinations = [root / rel for rel in generated.outputs] + [root / LOCK_PATH]
    return [path.relative_to(root) for path in stale_temporaries(destinations)]


def _orphans(root: Path, generated: Generated) -> list[str]:
    """Files in generated/ that no source produces, sorted; the publisher's own leftovers excluded."""
    folder = root / GENERATED_DIR
    present = sorted(p.relative_to(root) for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    known = set(generated.outputs) | set(_leftover_temporaries(root, generated))
    return [rel.as_posix() for rel in present if rel not in known]


def check(root: Path, generated: Generated) -> list[str]:
    """Missing, stale and orphaned outputs, leftover temporaries and lock mismatches; writes nothing."""
    issues = []
    for rel, data in sorted(generated.outputs.items()):
        path = root / rel
        if not path.exists():
            issues.append(f"missing: {rel.as_posix()}")
        elif path.read_bytes() != data:
            issues.append(f"stale: {rel.as_posix()}")
    issues += [f"orphaned (no source): {rel}" for rel in _orphans(root, generated)]
    issues += [f"leftover temporary of an interrupted gen (gen removes it): {rel.as_posix()}"
               for rel in _leftover_temporaries(root, generated)]
    return issues + lock_problems(root, generated.hashes)


def publish(root: Path, generated: Generated, *, update_lock: bool = False, ops: FileOps | None = None) -> list[Path]:
    """Write the outputs that differ, as one transaction (see publish.py); returns what was written.

    Orphans block publication, and so does any payload that differs from the lock unless
    `update_lock` is set, in which case the lock is rewritten in the same transaction.
    """
    orphans = _orphans(root, generated)
    if orphans:
        raise CodegenError([f"orphaned output (no source), remove it by hand: {rel}" for rel in orphans])
    if not update_lock:
        mismatches = lock_problems(root, generated.hashes)
        if mismatches:
            raise CodegenError(mismatches)
    files = {root / rel: data for rel, data in generated.outputs.items()}
    if update_lock:
        files[root / LOCK_PATH] = render_lock(generated.hashes)
    try:
        written = publish_files(files, ops=ops)
    except PublishError as error:
        raise CodegenError(error.problems) from error
    return [path.relative_to(root) for path in written]
