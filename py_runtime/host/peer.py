"""The peer engine's model: our synthetic model as an ONNX decoder for ONNX Runtime (Web), same weights.

`build_peer(model, layers, seed)` makes web/vendor/peer/<key>/, where <key> names the model and ends in a
content hash of everything the files depend on (so a rerun with the same inputs is instant):
  1. an HF checkpoint of our model (hf/: config.json, model.safetensors in f32, a word-level tokenizer.json
     of the model's vocabulary that the builder's AutoTokenizer reads; nothing from a hub), written a
     tensor at a time from the numpy twins (host/oracle/model.py: hf_layout says which weight is which)
  2. the onnxruntime-genai model builder's conversion of it: int4 for the WebGPU provider, block size 64
     (our GROUP_SIZE), symmetric, fp32 inputs and outputs (use_webgpu_fp32: no shader-f16 needed; neither
     SwiftShader nor Chromium on the H200 exposes it). It gives MatMulNBits linears (q, k and v fused),
     GroupQueryAttention with its own RoPE, and the embedding gathered from the tied lm_head's int4 weight
  2b. one repair of the builder's graph where needed: the tiny model's lm_head read layer 0's post-attention
     norm, not the final norm (rewire_lm_head; found by the logits check against transformers)
  3. our weights put back exactly: the builder re-quantizes our dequantized values by round-to-nearest,
     which is exact only for groups whose largest magnitude is a -8 level; every MatMulNBits weight is
     overwritten with our own levels and scales (its format is ours: value = (level - 8) * scale, 64 per
     block, two levels a byte, the even element in the low nibble), after checking that the builder's
     values lie within one of its steps of ours (a wrong row, order or packing is far outside that)
  4. recipe.json + literal.bin: how to write model.onnx.data again from the twins (numpy only) plus the
     few bytes that are not our weights (norm weights, RoPE tables): `materialize(folder)`, which is also
     how the data file is made here, so a GPU host without the builder (or torch) rebuilds it from a
     carried model.onnx, recipe.json and literal.bin (a few MB: `peer build --export DIR` copies them;
     build_peer there finds the carried folder under web/vendor/peer/ and writes its data file).
Dtypes: scales are written as the builder's initializer holds them (f32 here; f16 builds would round).
The builder records accuracy_level 4 on every MatMulNBits: providers may quantize the activations to
int8 per block, so the peer is judged with the int8x activation tolerance (host/oracle/model.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..models.config import ModelConfig, model_config
from ..models.weights import GROUP_SIZE, MatrixSpec, VectorSpec, weight_specs
from .oracle.model import HfTensor, hf_config, hf_layout, q4_matrix_np
from .oracle.synth import synth_values_np

__all__ = ["PEER_DIR", "PEER_CAPACITY", "BUILDER_OPTIONS", "CARRIED", "build_peer", "find_peer",
           "export_peer", "materialize",
           "peer_key", "run_ort_cpu", "PeerError"]

PEER_DIR = Path("web/vendor/peer")
PEER_CAPACITY = 4096            # positions the peer's RoPE tables (and our prompt + decode) cover
BLOCK_SIZE = GROUP_SIZE
BUILDER_OPTIONS = ("-p", "int4", "-e", "webgpu", "--extra_options", f"block_size={BLOCK_SIZE}", "use_webgpu_fp32=1",
                   "hf_token=false")
FORMAT = 1                      # part of the content hash: bump it when what this module writes changes


class PeerError(RuntimeError):
    pass


def _versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("onnxruntime-genai", "onnx-ir", "onnx", "transformers")}


def peer_key(config: ModelConfig, seed: int) -> str:
    """The folder name: the model, its depth and seed, and a hash of every input of the build."""
    facts = {"format": FORMAT, "config": config.to_json(), "seed": seed, "capacity": PEER_CAPACITY,
             "options": BUILDER_OPTIONS, "versions": _versions()}
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
    return f"{config.key}-L{config.layers}-s{seed}-{digest}"


CARRIED = ("peer.json", "model.onnx", "recipe.json", "literal.bin")     # what rebuilds a peer folder


def _builder_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("onnxruntime_genai") is not None


def find_peer(root: Path, config: ModelConfig, seed: int) -> Path | None:
    """Where the builder is not installed (a GPU host): the one peer folder of this model, depth and seed
    under web/vendor/peer/ (carried there as CARRIED; its data file written from the recipe if missing)."""
    found = sorted(p for p in (root / PEER_DIR).glob(f"{config.key}-L{config.layers}-s{seed}-*")
                   if (p / "peer.json").exists() and not p.name.endswith(".partial"))
    if len(found) > 1:
        raise PeerError(f"{len(found)} peer builds of {config.key}-L{config.layers}-s{seed}: "
                        f"{[p.name for p in found]}; keep one")
    if not found:
        return None
    if not (found[0] / "model.onnx.data").exists():
        materialize(found[0])
    write_index(root)
    return found[0]


def write_index(root: Path) -> None:
    """web/vendor/peer/index.json: {"<model>-L<layers>-s<seed>": folder name} of every complete build, so
    the page's compare view finds a build without the host's hash."""
    index = {}
    for folder in sorted((root / PEER_DIR).iterdir()):
        if (folder / "peer.json").exists() and not folder.name.endswith(".partial"):
            index[folder.name.rsplit("-", 1)[0]] = folder.name
    (root / PEER_DIR / "index.json").write_text(json.dumps(index, indent=1) + "\n")


def export_peer(folder: Path, target: Path) -> Path:
    """Copies what rebuilds `folder` (CARRIED: a few MB) to target/<key>/, for a GPU host without the builder."""
    out = target / folder.name
    out.mkdir(parents=True, exist_ok=True)
    for name in CARRIED:
        shutil.copy(folder / name, out / name)
    return out


# -- 1. the HF checkpoint ---------------------------------------------------------------------------

def _spec_values(spec, seed: int) -> np.ndarray:
    """Our weight in f32: a matrix's (level - 8) * scale (rounded to f32; step 3 puts the exact levels
    back), a norm weight's values."""
    if isinstance(spec, VectorSpec):
        return synth_values_np(spec.value_range, seed, spec.stream, spec.length).astype(np.float32)
    levels, scales = q4_matrix_np(spec, seed)
    values = levels.astype(np.float32) - np.float32(8)
    values = values.reshape(spec.rows, -1, GROUP_SIZE) * scales[:, :, None]
    return values.reshape(spec.rows, spec.cols)


def _write_safetensors(path: Path, config: ModelConfig, seed: int) -> None:
    """model.safetensors (f32), one source weight in memory at a time: the tensors cut from one weight
    are adjacent in the file (safetensors only needs the header's offsets to match)."""
    specs = {spec.name: spec for spec in weight_specs(config)}
    by_spec: dict[str, list[HfTensor]] = {}
    for tensor in hf_layout(config):
        by_spec.setdefault(tensor.spec, []).append(tensor)
    header, offset = {}, 0
    for spec_name, tensors in by_spec.items():
        spec = specs[spec_name]
        for tensor in tensors:
            if isinstance(spec, MatrixSpec):
                shape = [(tensor.hi if tensor.hi is not None else spec.rows) - tensor.lo, spec.cols]
            else:
                shape = [spec.length]
            size = 4 * int(np.prod(shape))
            header[tensor.name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
            offset += size
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for spec_name, tensors in by_spec.items():
            values = _spec_values(specs[spec_name], seed)
            for tensor in tensors:
                out.write(np.ascontiguousarray(tensor.take(values), np.float32).tobytes())
            del values


def _write_tokenizer(folder: Path, vocab: int) -> None:
    """A word-level tokenizer.json of ids only ("<i>" for id i): the builder reads special token ids
    through AutoTokenizer; nobody tokenizes text with it."""
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.WordLevel({f"<{i}>": i for i in range(vocab)}, unk_token="<0>"))
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": PEER_CAPACITY}))


def write_checkpoint(folder: Path, config: ModelConfig, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    hf = hf_config(config, PEER_CAPACITY, "float32")
    hf.architectures = ["Qwen3ForCausalLM" if config.qk_norm else "LlamaForCausalLM"]
    hf.bos_token_id, hf.eos_token_id = 1, 2
    hf.save_pretrained(folder)
    _write_safetensors(folder / "model.safetensors", config, seed)
    _write_tokenizer(folder, config.vocab)


# -- 2. the builder -----------------------------------------------------------------------------------

def run_builder(checkpoint: Path, out: Path, cache: Path) -> None:
    command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(checkpoint), "-o", str(out),
               "-c", str(cache), *BUILDER_OPTIONS]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not (out / "model.onnx").exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise PeerError(f"the onnxruntime-genai builder failed ({done.returncode}):\n{tail}")


def rewire_lm_head(path: Path, config: ModelConfig) -> str | None:
    """For the tiny model (onnxruntime-genai 0.18, transformers 5; the Llama and Qwen3 builds are wired right)
    the builder feeds the lm_head layer 0's post-attention norm instead of the final norm (its logits then
    ignore every later layer: 3 sigma off transformers). Connects it to the final norm's output and moves it
    last (the graph's topological order). Returns what it changed, or None where it was right."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    nodes = list(model.graph.node)
    final = f"/model/layers.{config.layers}/final_norm_layernorm/output_0"
    if not any(final in node.output for node in nodes):
        raise PeerError(f"{path}: no final norm output {final!r}")
    heads = [node for node in nodes if node.op_type in ("MatMul", "MatMulNBits") and node.input[1].startswith("lm_head.")]
    if len(heads) != 1:
        raise PeerError(f"{path}: {len(heads)} lm_head nodes")
    head = heads[0]
    if head.input[0] == final:
        return None
    was = head.input[0]
    head.input[0] = final
    del model.graph.node[:]
    model.graph.node.extend([node for node in nodes if node is not head] + [head])
    onnx.save(model, str(path))
    return f"lm_head read {was}; rewired to {final}"


# -- 3. our weights, exactly --------------------------------------------------------------------------

_MATMUL = re.compile(r"^(?:model\.layers\.(\d+)\.(attn|mlp)\.(\w+_proj)|(lm_head))\.MatMul\.weight_(Q4|scales)$")
_PROJ = {"qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
         "q_proj": ("self_attn.q_proj",), "k_proj": ("self_attn.k_proj",), "v_proj": ("self_attn.v_proj",),
         "o_proj": ("self_attn.o_proj",), "gate_proj": ("mlp.gate_proj",), "up_proj": ("mlp.up_proj",),
         "down_proj": ("mlp.down_proj",)}


def _hf_sources(config: ModelConfig, initializer: str) -> tuple[str, list[HfTensor]] | None:
    """(Q4 or scales, the HF tensors whose rows it stacks) of a MatMulNBits initializer, else None."""
    found = _MATMUL.match(initializer)
    if not found:
        return None
    layer, _, proj, head, part = found.groups()
    by_name = {t.name: t for t in hf_layout(config)}
    if head:
        names = ["lm_head.weight" if "lm_head.weight" in by_name else "model.embed_tokens.weight"]
    else:
        if proj not in _PROJ:
            raise PeerError(f"{initializer}: unknown projection {proj!r}")
        names = [f"model.layers.{layer}.{p}.weight" for p in _PROJ[proj]]
    return part, [by_name[name] for name in names]


def _packed(levels: np.ndarray) -> np.ndarray:
    """MatMulNBits' B [N, K / 64, 32]: two levels a byte, the even element in the low nibble."""
    n, k = levels.shape
    pairs = levels.reshape(n, k // 2, 2)
    return (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).astype(np.uint8).reshape(n, k // BLOCK_SIZE, BLOCK_SIZE // 2)


def _unpacked(packed: np.ndarray, n: int, k: int) -> np.ndarray:
    flat = packed.reshape(n, k // 2)
    return np.stack([flat & 15, flat >> 4], axis=-1).reshape(n, k)


_DTYPES = {1: np.float32, 2: np.uint8, 10: np.float16}


def _read_graph(folder: Path):
    import onnx

    return onnx.load(str(folder / "model.onnx"), load_external_data=False)


def _external(initializer) -> tuple[int, int]:
    info = {entry.key: entry.value for entry in initializer.external_data}
    if info.get("location") != "model.onnx.data":
        raise PeerError(f"{initializer.name}: external data in {info.get('location')!r}, not model.onnx.data")
    return int(info.get("offset", 0)), int(info["length"])


def _recipe(folder: Path, config: ModelConfig, seed: int) -> tuple[list[dict], bytes]:
    """recipe.json's entries and literal.bin from the builder's output, after checking the builder's
    re-quantized weights against ours: within one of its steps. Its scale is the group's largest-magnitude
    value over -8 (signed), so values round to the nearest level (half a step) except the opposite end,
    clamped from +8 to 7 (one step); a wrong row, order or packing is many steps off."""
    graph = _read_graph(folder).graph
    data = np.memmap(folder / "model.onnx.data", np.uint8, mode="r")
    specs = {spec.name: spec for spec in weight_specs(config)}
    entries, literal, matmuls = [], bytearray(), {}
    for init in graph.initializer:
        if init.data_location != 1:
            continue
        offset, length = _external(init)
        source = _hf_sources(config, init.name)
        if source is None:
            entries.append({"name": init.name, "offset": offset, "length": length, "literal": len(literal)})
            literal += data[offset:offset + length].tobytes()
            continue
        part, tensors = source
        entry = {"name": init.name, "offset": offset, "length": length, "part": part,
                 "dtype": int(init.data_type), "dims": list(init.dims),
                 "rows": [[t.spec, t.lo, t.hi, list(t.order) if t.order else None] for t in tensors]}
        entries.append(entry)
        matmuls.setdefault(init.name.rsplit(".", 1)[0], {})[part] = (entry, init)
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, parts in matmuls.items():
        if set(parts) != {"Q4", "scales"}:
            raise PeerError(f"{name}: the builder wrote {sorted(parts)}, not an int4 weight and its scales")
        levels, scales = _our_rows(parts["Q4"][0], specs, seed, cache)
        (q_entry, q_init), (s_entry, s_init) = parts["Q4"], parts["scales"]
        n, k = levels.shape
        theirs_levels = _unpacked(np.frombuffer(data[q_entry["offset"]:q_entry["offset"] + q_entry["length"]],
                                                np.uint8), n, k).astype(np.float64) - 8
        theirs_scales = np.frombuffer(data[s_entry["offset"]:s_entry["offset"] + s_entry["length"]],
                                      _DTYPES[s_init.data_type]).astype(np.float64).reshape(n, k // BLOCK_SIZE)
        theirs = theirs_levels.reshape(n, -1, BLOCK_SIZE) * theirs_scales[:, :, None]
        ours = (levels.astype(np.float64) - 8).reshape(n, -1, BLOCK_SIZE) * scales.astype(np.float64)[:, :, None]
        worst = float(np.max(np.abs(theirs - ours) / np.abs(theirs_scales[:, :, None]).clip(1e-30)))
        if worst > 1 + 1e-3:
            raise PeerError(f"{name}: the builder's weights are {worst:.3g} of its step from ours (over 1): "
                            "a wrong row mapping, order or packing")
        q_entry["builder_max_step_error"] = worst
        if tuple(q_init.dims) != (n, k // BLOCK_SIZE, BLOCK_SIZE // 2):
            raise PeerError(f"{name}: B dims {list(q_init.dims)}, expected [{n}, {k // BLOCK_SIZE}, {BLOCK_SIZE // 2}]")
    return entries, bytes(literal)


def _our_rows(entry: dict, specs: dict, seed: int, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    """Our levels [N, K] and f32 scales [N, K / 64] for a recipe entry's stacked rows."""
    levels, scales = [], []
    for spec_name, lo, hi, order in entry["rows"]:
        if spec_name not in cache:
            cache.clear()           # one source matrix in memory at a time (entries of one matrix are adjacent)
            cache[spec_name] = q4_matrix_np(specs[spec_name], seed)
        tensor = HfTensor("", spec_name, lo, hi, tuple(order) if order else None)
        levels.append(tensor.take(cache[spec_name][0]))
        scales.append(tensor.take(cache[spec_name][1]))
    return np.concatenate(levels), np.concatenate(scales)


def materialize(folder: Path) -> Path:
    """Writes folder/model.onnx.data from recipe.json, literal.bin and the numpy twins."""
    meta = json.loads((folder / "peer.json").read_text())
    config = model_config(meta["model"], meta["layers"])
    entries = json.loads((folder / "recipe.json").read_text())
    literal = (folder / "literal.bin").read_bytes()
    specs = {spec.name: spec for spec in weight_specs(config)}
    size = max(e["offset"] + e["length"] for e in entries)
    target = folder / "model.onnx.data.partial"
    data = np.memmap(target, np.uint8, mode="w+", shape=(size,))
    cache: dict = {}
    for entry in entries:
        at, length = entry["offset"], entry["length"]
        if "literal" in entry:
            data[at:at + length] = np.frombuffer(literal, np.uint8, length, entry["literal"])
            continue
        levels, scales = _our_rows(entry, specs, meta["seed"], cache)
        if entry["part"] == "Q4":
            chunk = _packed(levels)
        else:
            chunk = scales.astype(_DTYPES[entry["dtype"]])
        raw = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1)
        if raw.size != length:
            raise PeerError(f"{entry['name']}: {raw.size} bytes of ours for {length} in the file")
        data[at:at + length] = raw
    data.flush()
    del data
    target.rename(folder / "model.onnx.data")
    return folder / "model.onnx.data"


def build_peer(root: Path, model: str, layers: int | None, seed: int, *, log=print) -> Path:
    """The peer's folder under web/vendor/peer/, built unless a build of the same inputs is there (without
    the builder installed: the one carried build of this model, depth and seed, see find_peer)."""
    config = model_config(model, layers)
    if not _builder_installed():
        found = find_peer(root, config, seed)
        if found is None:
            raise PeerError(f"no peer build of {config.key}-L{config.layers}-s{seed} under {root / PEER_DIR}, and "
                            "no onnxruntime-genai here to make one (carry one: `peer build --export DIR`)")
        return found
    folder = root / PEER_DIR / peer_key(config, seed)
    if (folder / "peer.json").exists() and (folder / "model.onnx.data").exists():
        write_index(root)
        return folder
    if (folder / "peer.json").exists() and (folder / "recipe.json").exists():
        log(f"[peer] {folder.name}: writing model.onnx.data from the recipe")
        materialize(folder)
        return folder
    work = root / ".cache/peer-build" / folder.name
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    log(f"[peer] {folder.name}: writing the HF checkpoint of {config.name} ({config.layers} layers, seed {seed})")
    write_checkpoint(work / "hf", config, seed)
    log(f"[peer] converting with the onnxruntime-genai builder ({' '.join(BUILDER_OPTIONS)})")
    run_builder(work / "hf", work / "onnx", work / "cache")
    fixes = [fix for fix in [rewire_lm_head(work / "onnx" / "model.onnx", config)] if fix]
    for fix in fixes:
        log(f"[peer] builder graph fixed: {fix}")
    log("[peer] checking the builder's int4 weights against ours, then writing ours")
    entries, literal = _recipe(work / "onnx", config, seed)
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copy(work / "onnx" / "model.onnx", staging / "model.onnx")
    (staging / "recipe.json").write_text(json.dumps(entries))
    (staging / "literal.bin").write_bytes(literal)
    meta = dict(model=config.key, layers=config.layers, seed=seed, key=folder.name, capacity=PEER_CAPACITY,
                block_size=BLOCK_SIZE, io_dtype="float32", builder_options=list(BUILDER_OPTIONS),
                versions=_versions(), config=config.to_json(), builder_fixes=fixes,
                builder_max_step_error=max([e.get("builder_max_step_error", 0.0) for e in entries] or [0.0]),
                build_s=None)
    (staging / "peer.json").write_text(json.dumps(meta, indent=2))
    materialize(staging)
    meta["build_s"] = round(time.perf_counter() - started, 1)
    (staging / "peer.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    shutil.rmtree(work, ignore_errors=True)
    write_index(root)
    log(f"[peer] {folder} ({meta['build_s']} s)")
    return folder


def run_ort_cpu(folder: Path, prompt: list[int], decode: int) -> tuple[list[int], list[np.ndarray]]:
    """The peer model on onnxruntime's CPU provider: the prompt's last logits, then `decode` greedy steps
    with the KV cache (past_key_values in, present out). Returns (tokens, logits rows in f32)."""
    import onnxruntime as ort

    meta = json.loads((folder / "peer.json").read_text())
    config = model_config(meta["model"], meta["layers"])
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    past = {f"past_key_values.{i}.{kind}": np.zeros((1, config.kv_heads, 0, config.head_dim), np.float32)
            for i in range(config.layers) for kind in ("key", "value")}
    ids, length, tokens, rows = list(prompt), 0, [], []
    for _ in range(decode + 1):
        length += len(ids)
        outputs = session.run(None, {"input_ids": np.array([ids], np.int64),
                                     "attention_mask": np.ones((1, length), np.int64), **past})
        named = dict(zip([o.name for o in session.get_outputs()], outputs))
        row = named["logits"][0, -1].astype(np.float32)
        rows.append(row)
        tokens.append(int(np.argmax(row)))
        past = {name: named[name.replace("past_key_values", "present")] for name in past}
        ids = [tokens[-1]]
    return tokens, rows


if __name__ == "__main__":
    # python -m py_runtime.host.peer materialize FOLDER: the GPU host's step (numpy only).
    if len(sys.argv) == 3 and sys.argv[1] == "materialize":
        print(materialize(Path(sys.argv[2])))
    else:
        raise SystemExit("usage: python -m py_runtime.host.peer materialize FOLDER")
