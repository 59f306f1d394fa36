"""Q4 group-wise symmetric weights ("q4gsw"): the weight type, its quantization, the embedding lookup,
and a weight's way in from the host. The linears that read them are in q4_linear.py.

Layout (../shared/reference/kernels.md section 2): packed bytes [N, K/2] read as u32 words (nibble i
of word j of a row is k = 8j + i, stored as q + 8), f32 scales [K/gs, N]. A weight may also carry a
row-major copy of its scales [N, K/gs] (q4_scales_rows), which the int8x decode GEMVs read.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, IDLE, TOKENS, linear_grid, live_limit, live_value, single
from ..tensors import Tensor

__all__ = ["Q4Weight", "GROUP_SIZES", "q4_weight_bytes", "q4_quantize", "q4_scales_rows", "q4_embedding",
           "embedding_row_params", "q4_weight_from_host", "stream_read"]

GROUP_SIZES = (32, 64, 128)


def _layout_of(tensor: Tensor, rows: int, cols: int, what: str, other: str) -> str | None:
    """None when `tensor` can hold a [rows, cols] matrix: declared so, or flat with room for it. A 2-D
    tensor declared the other way round is the classic wrong layout, named as such."""
    if len(tensor.shape) == 1:
        return None if tensor.numel >= rows * cols else f"holds {tensor.numel} values, fewer than [{rows}, {cols}]"
    if len(tensor.shape) == 2 and tensor.shape == (rows, cols):
        return None
    if len(tensor.shape) == 2 and tensor.shape == (cols, rows):
        return f"is laid out [{cols}, {rows}] ({other}); {what} must be [{rows}, {cols}]"
    return f"has shape {list(tensor.shape)}; {what} must be [{rows}, {cols}] (or flat)"


@dataclass(frozen=True)
class Q4Weight:
    """A packed Q4 matrix; a projection may use rows [n_offset, n_offset + n) of it. Tensors declared
    2-D must have the layout's shape; flat ones need room for it."""

    packed: Tensor          # u32 words, [n_total, k / 8]
    scales: Tensor          # f32, [k / group_size, n_total]
    k: int
    n_total: int
    group_size: int
    n_offset: int = 0
    n: int | None = None
    scales_rows: Tensor | None = None   # optional row-major copy [n_total, K/gs] (q4_scales_rows): int8x decode

    def __post_init__(self):
        name, groups = self.packed.name, self.k // self.group_size
        if self.group_size not in GROUP_SIZES or self.k % self.group_size:
            raise ValueError(f"Q4 weight {name!r}: K {self.k} must be a multiple of the group size "
                             f"{self.group_size}, one of {GROUP_SIZES}")
        problems = []
        if self.packed.dtype != "u32":
            problems.append(f"packed {self.packed!r} must be u32 words")
        else:
            bad = _layout_of(self.packed, self.n_total, self.k // 8, "packed words", "K-major")
            problems += [f"packed {self.packed!r} {bad}"] if bad else []
        for tensor, rows, cols, what, other in (
                (self.scales, groups, self.n_total, "the linear scales", "row-major: that is scales_rows' layout"),
                (self.scales_rows, self.n_total, groups, "the row-major scale copy", "the linear scales' layout")):
            if tensor is None:
                continue
            bad = "must be f32" if tensor.dtype != "f32" else _layout_of(tensor, rows, cols, what, other)
            problems += [f"{tensor!r} {bad}"] if bad else []
        if problems:
            raise ValueError(f"Q4 weight {name!r} [{self.n_total}, {self.k}], gs {self.group_size}: " + "; ".join(problems))
        if self.n is None:
            object.__setattr__(self, "n", self.n_total - self.n_offset)
        if not (0 <= self.n_offset and self.n_offset + self.n <= self.n_total):
            raise ValueError(f"Q4 weight {name!r}: rows [{self.n_offset}, {self.n_offset + self.n}) "
                             f"outside its {self.n_total} rows")

    def rows(self, n_offset: int, n: int) -> "Q4Weight":
        """A view of rows [n_offset, n_offset + n): one projection of a packed QKV weight."""
        return Q4Weight(self.packed, self.scales, self.k, self.n_total, self.group_size, n_offset, n, self.scales_rows)

    @property
    def is_view(self) -> bool:
        return self.n != self.n_total


def q4_weight_bytes(k: int, n: int, group_size: int) -> int:
    """Bytes of an N x K Q4 weight: packed nibbles plus f32 scales."""
    return n * k // 2 + 4 * n * k // group_size


async def q4_weight_from_host(runtime, name: str, *, k: int, n: int, group_size: int, packed: bytes,
                              scales: bytes, scales_shape: tuple[int, int], with_rows_copy: bool = False) -> Q4Weight:
    """A Q4Weight from host bytes: `packed` [N, K/2] bytes (even k in the low nibble, q + 8) and `scales`
    f32 little-endian, declared as `scales_shape`, which must be the linear layout [K/gs, N]. Sizes and
    the layout are checked before anything is allocated; `with_rows_copy` also allocates the row-major
    scale copy (fill it with q4_scales_rows)."""
    groups = k // group_size if group_size else 0
    problems = []
    if group_size not in GROUP_SIZES or k % group_size or k % 8:
        problems.append(f"K {k} must be a multiple of 8 and of the group size {group_size}, one of {GROUP_SIZES}")
    else:
        if len(packed) != n * k // 2:
            problems.append(f"packed holds {len(packed)} bytes; [{n}, {k // 2}] needs {n * k // 2}")
        if tuple(scales_shape) == (n, groups) and n != groups:
            problems.append(f"scales are laid out [N, K/gs] = [{n}, {groups}]; the linear layout is [K/gs, N] = "
                            f"[{groups}, {n}] (transpose them)")
        elif tuple(scales_shape) != (groups, n):
            problems.append(f"scales_shape {list(scales_shape)} is not [K/gs, N] = [{groups}, {n}]")
        if len(scales) != 4 * groups * n:
            problems.append(f"scales hold {len(scales)} bytes; [{groups}, {n}] f32 needs {4 * groups * n}")
    if problems:
        raise ValueError(f"q4_weight_from_host({name!r}): " + "; ".join(problems))
    tensors = runtime.tensors
    packed_tensor = await tensors.allocate(f"{name}.packed", (n, k // 8), "u32")
    scales_tensor = await tensors.allocate(f"{name}.scales", (groups, n))
    rows_copy = await tensors.allocate(f"{name}.scales_rows", (n, groups)) if with_rows_copy else None
    runtime.device.write_buffer(packed_tensor.buffer, packed)
    runtime.device.write_buffer(scales_tensor.buffer, scales)
    return Q4Weight(packed_tensor, scales_tensor, k, n, group_size, scales_rows=rows_copy)


def q4_quantize(*, weight: Q4Weight, w: Tensor | None = None, synth: tuple | None = None,
                scales_row_major: bool = False, first_row: int = 0, rows: int | None = None) -> Op:
    """Quantize into `weight` (its packed and scales tensors) either the f32 tensor `w` [N, K], or
    the synthetic weight `synth` = (UniformRange, seed, stream), generated in place (w[n, k] is
    element n * K + k of fill_uniform's sequence) so no f32 copy of a large weight ever exists.
    Scales are [K/gs, N] (the linear layout) unless scales_row_major ([N, K/gs], the embedding layout).
    `first_row` and `rows` (default: all N) quantize only rows [first_row, first_row + rows) of the
    weight; `w` then holds those rows ([rows, K], or flat with room for them): a checkpoint's q, k and v
    land in their rows of one packed QKV weight, a large tensor a chunk of rows at a time."""
    n, k = weight.n_total, weight.k
    rows = n - first_row if rows is None else rows
    if (w is None) == (synth is None):
        raise ValueError("q4_quantize: give exactly one of w (a tensor) or synth (range, seed, stream)")
    if not (0 <= first_row and 1 <= rows and first_row + rows <= n):
        raise ValueError(f"q4_quantize({weight.packed.name}): rows [{first_row}, {first_row + rows}) outside its {n}")
    if w is not None and w.shape != (rows, k) and not (len(w.shape) == 1 and w.numel >= rows * k):
        raise ValueError(f"q4_quantize: w {list(w.shape)} does not match rows [{first_row}, {first_row + rows}) "
                         f"of the Q4 weight [{n}, {k}]")
    groups = rows * (k // weight.group_size)
    value_range, seed, stream = synth if synth else (None, 0, 0)

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(groups, spec.invocations, live_limit(live)),
                      params=spec.pack_params(n=n, k=k, group_size=weight.group_size, seed=seed, stream=stream,
                                              scale_log2=value_range.scale_log2 if synth else 0,
                                              offset=value_range.offset if synth else 0.0,
                                              scales_row_major=scales_row_major, first_row=first_row, rows=rows),
                      bytes_moved=(0 if synth else 4 * rows * k) + rows * k // 2 + 4 * groups)

    tensors = {"packed": weight.packed, "scales": weight.scales}
    if w is not None:
        tensors["w"] = w
    return single(OpCall(label=f"q4_quantize({weight.packed.name})",
                         kernel="q4gsw_quantize_synth" if synth else "q4gsw_quantize", route="q4_quantize",
                         tensors=tensors, sizing=sizing))


def q4_scales_rows(weight: Q4Weight) -> Op:
    """Fill weight.scales_rows with the row-major copy of weight.scales (once, at load): the int8x
    decode GEMVs then read it (the "_sr" variants, see q4gsw_scales_rows.wgsl); every other route
    keeps reading the reference scales."""
    if weight.scales_rows is None:
        raise ValueError(f"q4_scales_rows: Q4 weight {weight.packed.name!r} has no scales_rows tensor to fill")
    groups, count = weight.k // weight.group_size, weight.n_total * (weight.k // weight.group_size)

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(count, spec.invocations, live_limit(live)),
                      params=spec.pack_params(groups=groups, n_total=weight.n_total), bytes_moved=8 * count)

    return single(OpCall(label=f"q4_scales_rows({weight.packed.name})", kernel="q4gsw_scales_rows",
                         route="q4_scales_rows", tensors={"scales": weight.scales, "rows": weight.scales_rows},
                         sizing=sizing))


def embedding_row_params(weight: Q4Weight, *, nibble_high_first: bool, scales_transposed: bool) -> dict:
    """The params by which a kernel reads an embedding row (q4_embed_word.wgsli): its geometry and the two
    conventions, immutable controls packed again at every sizing so a resize can never drop them."""
    return {"dim": weight.k, "vocab": weight.n_total, "group_size": weight.group_size,
            "nibble_high_first": nibble_high_first, "scales_transposed": scales_transposed}


def q4_embedding(*, ids: Tensor, weight: Q4Weight, out: Tensor, status: Tensor, tokens: int | str = TOKENS,
                 nibble_high_first: bool = False, scales_transposed: bool = True) -> Op:
    """out[t] = dequant(weight[ids[t]]) for t < tokens (zeros and status[t] = 1 for ids >= vocab).
    `weight` is [vocab, dim] (k = dim); the two conventions are immutable controls, packed into the
    params on every sizing so a resize of `tokens` can never drop them."""
    dim = weight.k
    if ids.dtype != "u32" or status.dtype != "u32" or out.shape[-1] != dim:
        raise ValueError(f"q4_embedding: ids {ids!r}, status {status!r} must be u32 and out {out!r} rows of {dim}")
    capacity = min(ids.numel, status.numel, out.numel // dim)

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "q4_embedding")
        if not 0 <= t <= capacity:
            raise ValueError(f"q4_embedding({out.name}): {t} tokens, but ids/status/out hold {capacity}")
        n = t * dim             # (one packed word of 8 values an invocation)
        return Sizing(workgroups=linear_grid(n // 8, spec.invocations, live_limit(live)) if n else IDLE,
                      params=spec.pack_params(tokens=t, **embedding_row_params(
                          weight, nibble_high_first=nibble_high_first, scales_transposed=scales_transposed)),
                      bytes_moved=n // 2 + 4 * n // weight.group_size + 4 * n + 8 * t, flops=n)

    return single(OpCall(label=f"q4_embedding({out.name})", kernel="q4gsw_embedding", route="q4_embedding",
                         tensors={"ids": ids, "packed": weight.packed, "scales": weight.scales, "out": out,
                                  "status": status}, sizing=sizing))


def stream_read(*, data: Tensor, sink: Tensor, nbytes: int | None = None, offset: int = 0, store: bool = False) -> Op:
    """Read bytes [offset, offset + nbytes) of `data` once (default: all of it), one vec4 per
    invocation up to 65535 workgroups, then grid-stride (the bandwidth yardstick). `store`: every
    workgroup also writes its fold to `sink` (a read plus a kernel's write-back)."""
    nbytes = data.nbytes - offset if nbytes is None else nbytes
    if offset % 16 or nbytes < 16 or offset + nbytes > data.nbytes:
        raise ValueError(f"stream_read({data.name}): range [{offset}, {offset + nbytes}) must be 16-byte aligned, "
                         f"at least 16 bytes, within {data.nbytes}")
    words4 = nbytes // 16

    def sizing(spec, live):
        workgroups = max(1, min(65535, -(-words4 // spec.invocations)))
        return Sizing(workgroups=(workgroups, 1, 1), params=spec.pack_params(words4=words4, first4=offset // 16),
                      bytes_moved=16 * words4)

    return single(OpCall(label=f"stream_read({data.name}@{offset})",
                         kernel="stream_read_store" if store else "stream_read", route="stream_read",
                         tensors={"data": data, "sink": sink}, sizing=sizing))
