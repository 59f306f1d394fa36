"""The KV cache and attention routes through the native backend, against float64 numpy: every case of
the CI preset, a verifier proven to fail, and the errors a wrong size or shape gets."""

from __future__ import annotations

import asyncio
import copy

import numpy as np
import pytest

from py_runtime.app import run
from py_runtime.host.oracle import verify_attention_report
from py_runtime.host.oracle.attention import attention_reference
from py_runtime.host.oracle.decoder_blocks import rope_cos_sin_reference, rope_reference
from py_runtime.host.oracle.elementwise import f16_allowed
from py_runtime.kernels import kernel, kernel_names
from py_runtime.oneshot import run_op, tensor
from py_runtime.models.config import LLAMA_3_2_1B, QWEN3_0_6B
from py_runtime.ops.attention import (AttentionScratch, KVCache, kv_cache_write, kv_f16_twins, rope_kv_cache_write,
                                     sdpa, subgroup_prefill_rows)
from py_runtime.ops.rope import cos_sin_table, inverse_frequencies
from py_runtime.plan import Plan
from py_runtime.runtime import Runtime
from py_runtime.tensors import Tensor


def _run(options):
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = bytes(data)

    return asyncio.run(run("native", {"suite": "attention", **options}, sink)), artifacts


@pytest.fixture(scope="module")
def native_run():
    return _run({})


def test_every_route_and_geometry_matches_the_oracle(native_run):
    report, artifacts = native_run
    assert report["result"] == "not checked"            # the oracle below judges the outputs
    worst = verify_attention_report(report, artifacts.__getitem__)
    assert all(0 <= ratio <= 1 for ratio in worst.values()), worst
    routes = {step["routes"][-1] for case in report["cases"] for step in case["steps"]}
    assert routes == {"sdpa_materialized", "sdpa_flash_subgroup", "sdpa_flash_decode", "sdpa_prefill_subgroup",
                      "sdpa_k16", "sdpa_q16", "sdpa_q32", "sdpa_decode_subgroup"}
    # one plan per case served its prefill and then a decode, each attested with its own route
    prefill_then_decode = {c["geometry"]: [s["routes"][-1] for s in c["steps"]] for c in report["cases"]
                           if c["tokens"] > 1 and not c["force"] and not c["q32"] and not c["prefill"]}
    assert prefill_then_decode == {"llama": ["sdpa_prefill_subgroup", "sdpa_decode_subgroup"],
                                   "qwen3": ["sdpa_prefill_subgroup", "sdpa_decode_subgroup"],
                                   "awkward": ["sdpa_materialized", "sdpa_decode_subgroup"],
                                   "gqa3": ["sdpa_prefill_subgroup", "sdpa_decode_subgroup"]}
    forced = {c["name"]: [s["routes"][-1] for s in c["steps"]] for c in report["cases"] if c["prefill"]}
    assert forced == {"llama.s129.p1.sdpa_k16": ["sdpa_k16", "sdpa_decode_subgroup"],
                      "qwen3.s7.p300.sdpa_q16": ["sdpa_q16", "sdpa_decode_subgroup"]}
    # past the one pass's reach (512 keys here) FlashDecoding runs in the same plan
    long = {c["name"]: [s["routes"][-1] for s in c["steps"]] for c in report["cases"] if c["pos"] == 1000}
    assert long["llama.s1.p1000"] == long["qwen3.s1.p1000"] == ["sdpa_flash_subgroup"] * 2
    assert long["gqa3.s1.p1000.sdpa_decode_subgroup"] == ["sdpa_decode_subgroup"] * 2


def test_the_verifier_catches_wrong_outputs_caches_and_routes(native_run):
    report, artifacts = native_run
    case = next(c for c in report["cases"] if c["name"] == "qwen3.s7.p1")
    for step in case["steps"]:                          # one output element off by a little
        broken = dict(artifacts)
        values = np.frombuffer(broken[step["artifact"]], np.float32).copy()
        values[5] += 2e-4 * max(1.0, abs(values[5]))
        broken[step["artifact"]] = values.tobytes()
        with pytest.raises(AssertionError, match="outputs over the bound"):
            verify_attention_report({**report, "cases": [case]}, broken.__getitem__)
    broken = dict(artifacts)                            # one cache half one f16 step away
    words = np.frombuffer(broken[case["cache_artifacts"][1]], np.uint16).copy()
    words[3] ^= 2
    broken[case["cache_artifacts"][1]] = words.tobytes()
    with pytest.raises(AssertionError, match="not an f16 rounding"):
        verify_attention_report({**report, "cases": [case]}, broken.__getitem__)
    rope_case = next(c for c in report["cases"] if c["rope"])
    broken = dict(artifacts)                            # a rotated key one f16 step short of its neighbour's
    words = np.frombuffer(broken[rope_case["cache_artifacts"][0]], np.uint16).copy()
    at = rope_case["pos"] * rope_case["kv_heads"] * rope_case["head_dim"] + 3
    words[at] ^= 4
    broken[rope_case["cache_artifacts"][0]] = words.tobytes()
    with pytest.raises(AssertionError, match="cached keys off float64 RoPE"):
        verify_attention_report({**report, "cases": [rope_case]}, broken.__getitem__)
    relabelled = copy.deepcopy(case)                    # a decode attested as the materialized route
    relabelled["steps"][1]["routes"] = ["kv_cache_write", "sdpa_materialized"]
    with pytest.raises(AssertionError, match=r"expected \['kv_cache_write', 'sdpa_decode_subgroup'\]"):
        verify_attention_report({**report, "cases": [relabelled]}, artifacts.__getitem__)


def test_the_cache_in_shader_f16_types_is_attested_and_its_spelling_checked(native_run):
    """lavapipe has shader-f16: a kv_f16 case's writer and subgroup passes ran their kvf16_ spellings, attested
    kv_f16 at every step, and the verifier refuses a step without the attestation, a packed subgroup pass,
    and a spelled pass on a device that (as reported) lacks the feature."""
    report, artifacts = native_run
    assert "shader-f16" in report["adapter"]["device_features"]
    spelled = {c["name"]: c for c in report["cases"] if c["kv_f16"]}
    assert len(spelled) == 5 and all(c["kv_f16_refused"] is None for c in spelled.values())
    assert all("kv_f16" in step["routes"] for c in spelled.values() for step in c["steps"])
    assert not any("kv_f16" in step["routes"] for c in report["cases"] if not c["kv_f16"] for step in c["steps"])
    case = spelled["llama.s1.p1500.kvf16"]
    assert case["kernels"][:2] == ["kvf16_sdpa_decode_sg_w2u2p", "kvf16_sdpa_flash_split_sg_g4w2u2h1"]
    unattested = copy.deepcopy(case)
    unattested["steps"][0]["routes"].remove("kv_f16")
    with pytest.raises(AssertionError, match="expected"):
        verify_attention_report({**report, "cases": [unattested]}, artifacts.__getitem__)
    packed = copy.deepcopy(case)
    packed["kernels"][1] = "sdpa_flash_split_sg_g4w2u2h1"
    with pytest.raises(AssertionError, match="ran sdpa_flash_split_sg_g4w2u2h1 with the cache in shader-f16 types"):
        verify_attention_report({**report, "cases": [packed]}, artifacts.__getitem__)
    adapter = {**report["adapter"], "device_features": [f for f in report["adapter"]["device_features"]
                                                        if f != "shader-f16"]}
    with pytest.raises(AssertionError, match="with the cache packed"):
        verify_attention_report({**report, "adapter": adapter, "cases": [case]}, artifacts.__getitem__)


def test_positions_past_the_cache_and_wrong_shapes_are_refused_before_dispatch():
    async def main():
        runtime = await Runtime.create("native")
        cache = await KVCache.allocate(runtime, "c", capacity=8, kv_heads=2, head_dim=16)
        scratch = await AttentionScratch.allocate(runtime, "s", heads=4, head_dim=16, max_tokens=4, capacity=8)
        q = await tensor(runtime, "q", (4, 4, 16))
        k = await tensor(runtime, "k", (4, 2, 16))
        out = await tensor(runtime, "o", (4, 4, 16))
        plan = Plan(runtime, "attn", live={"tokens": 4, "pos": 4})
        await plan.add(kv_cache_write(k=k, v=k, cache=cache))
        adapter = runtime.device.adapter
        await plan.add(sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=4, adapter=adapter))
        plan.record()
        with pytest.raises(ValueError, match=r"positions \[5, 9\) do not fit the KV cache's 8 rows"):
            plan.resize(pos=5)
        assert plan.live["pos"] == 4                    # the rejected size left the plan as it was
        with pytest.raises(ValueError, match=r"q Tensor\('q', \[4, 4, 16\], f32\) must be f32 \[tokens, 6, 16\]"):
            sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=6, adapter=adapter)
        with pytest.raises(ValueError, match="6 query heads do not divide into 4 KV heads"):
            sdpa(q=q, cache=await KVCache.allocate(runtime, "c4", capacity=8, kv_heads=4, head_dim=16), out=out,
                 scratch=scratch, heads=6, adapter=adapter)
        with pytest.raises(ValueError, match=r"k and v must be u32 \[8, 2, 8\]"):
            KVCache(q, q, cache.offset, 8, 2, 16)
        with pytest.raises(ValueError, match=r"the position offset must be u32 \[1\]"):
            KVCache(cache.k, cache.v, cache.k, cache.capacity, cache.kv_heads, cache.head_dim)
        with pytest.raises(ValueError, match="sdpa_materialized reads the position from its params alone"):
            sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=4, adapter=adapter, force="sdpa_materialized",
                 gpu_position=True)

    asyncio.run(main())


@pytest.mark.full
def test_the_full_matrix_of_lengths_and_positions():
    report, artifacts = _run({"preset": "full"})
    worst = verify_attention_report(report, artifacts.__getitem__)
    assert all(ratio <= 1 for ratio in worst.values())


def test_q32_is_opt_in_and_falls_back_to_q16_without_its_workgroup_memory():
    from py_runtime.gpu.device import AdapterReport
    from py_runtime.tensors import Tensor

    def adapter(storage):
        return AdapterReport(backend="native", info={}, features=(), device_features=(),
                             limits={"maxComputeWorkgroupStorageSize": storage, "maxComputeInvocationsPerWorkgroup": 256})

    u32 = lambda name, *shape: Tensor(name, shape, "u32", 0)    # noqa: E731
    f32 = lambda name, *shape: Tensor(name, shape, "f32", 0)    # noqa: E731
    cache = KVCache(u32("k", 64, 8, 64), u32("v", 64, 8, 64), u32("offset", 1), 64, 8, 128)
    scratch = AttentionScratch(f32("s", 16 * 16, 64), f32("ml", 16 * 256, 2), f32("o", 16 * 256, 128), 16, 64)
    q, out = f32("q", 16, 16, 128), f32("out", 16, 16, 128)
    prefill = lambda storage, **options: [c.route for c in sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=16,  # noqa
                                                                 adapter=adapter(storage), **options).at(16)]
    assert prefill(32768, q32=True) == ["sdpa_q32"] and prefill(32768) == ["sdpa_q16"]
    assert prefill(16384, q32=True) == ["sdpa_q16"]
    why = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=16, adapter=adapter(16384), q32=True).explain()
    assert "not sdpa_q32: needs 22976 bytes of workgroup memory and 256 invocations; the device allows 16384" in why


def _spellings(prefix: str) -> list:
    """(kernel, f16) for every kernel of a family (prefix), packed, and again with the cache in shader-f16
    types for those with a kvf16_ twin (lavapipe has shader-f16; sdpa maps the name to the twin)."""
    names = [n for n in kernel_names() if n.startswith(prefix)]
    return [(n, False) for n in names] + [(n, True) for n in names if n in kv_f16_twins()]


def _attested(route: str, f16: bool) -> list[str]:
    return [route, "kv_f16"] if f16 else [route]


async def _decode_setup(k_host, v_host, q_host, f16: bool = False):
    """A native runtime, a KV cache holding k_host and v_host (f32 [capacity, Hkv, D], written as f16; its
    kernels in shader-f16 types where `f16`) and the decode's q (q_host, [1, H, D]) and out, with their scratch."""
    (capacity, kv_heads, dim), heads = k_host.shape, q_host.shape[1]
    runtime = await Runtime.create("native")
    cache = await KVCache.allocate(runtime, "c", capacity=capacity, kv_heads=kv_heads, head_dim=dim, f16=f16)
    scratch = await AttentionScratch.allocate(runtime, "s", heads=heads, head_dim=dim, max_tokens=1, capacity=capacity)
    k, v = [await tensor(runtime, role, (capacity, kv_heads, dim)) for role in ("k", "v")]
    q, out = [await tensor(runtime, role, (1, heads, dim)) for role in ("q", "o")]
    for target, host in ((k, k_host), (v, v_host), (q, q_host)):
        runtime.device.write_buffer(target.buffer, host.tobytes())
    await run_op(runtime, kv_cache_write(k=k, v=v, cache=cache, tokens=capacity, pos=0))
    return runtime, cache, scratch, q, out


@pytest.mark.parametrize("name, f16", _spellings("sdpa_flash_split_sg_"))
def test_every_subgroup_split_variant_matches_the_oracle(name, f16):
    """Shipped and sweep variants alike (the sweep's figures only count if its kernels are right), at a
    short context and at one of several splits, or of one split of many steps."""
    values = kernel(name).template_values
    group, dim, kv_heads, capacity = values["G"], 32 * values["W"], 2, 300
    heads = group * kv_heads
    rng = np.random.default_rng(7)
    k_host, v_host = (rng.uniform(-1, 1, (capacity, kv_heads, dim)).astype(np.float32) for _ in range(2))
    q_host = rng.uniform(-1, 1, (1, heads, dim)).astype(np.float32)
    runs = ((5, 2), (capacity, 2), (capacity, 64))          # (context, workgroups wanted)

    async def main():
        runtime, cache, scratch, q, out = await _decode_setup(k_host, v_host, q_host, f16)
        outputs = []
        for ctx, workgroups in runs:
            plan = Plan(runtime, "attn", live={"tokens": 1, "pos": ctx - 1})
            await plan.add(sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=runtime.device.adapter,
                                force="sdpa_flash_subgroup", flash_split=(name, workgroups)))
            plan.record()
            assert list((await plan.replay()).routes) == _attested("sdpa_flash_subgroup", f16)
            outputs.append(np.frombuffer(await runtime.device.read_buffer(out.buffer), np.float32).reshape(q_host.shape))
            plan.release()
        return runtime.device.adapter.info, outputs

    info, outputs = asyncio.run(main())
    k16, v16 = (host.astype(np.float16).astype(np.float64) for host in (k_host, v_host))   # uniform(-1, 1): no subnormal
    for (ctx, workgroups), got in zip(runs, outputs):
        exact, bound = attention_reference(q_host, k16, v16, ctx - 1, 1 / dim ** 0.5, "sdpa_flash_subgroup", info,
                                           flash_split=(name, workgroups))
        assert np.all(np.abs(got - exact) <= bound), (name, ctx, workgroups, float(np.abs(got - exact).max()))


@pytest.mark.parametrize("name, f16", [(n, f16) for n, f16 in _spellings("sdpa_decode_sg_")
                                       if not n.startswith("sdpa_decode_sg_i8x_")])
def test_every_one_pass_decode_variant_matches_the_oracle(name, f16):
    """Shipped and sweep variants alike, at G 1, 3 and 4 (a workgroup per query head: any G), at a
    context of one key, one past a step of every slot, and many steps; head_dim 40 leaves lanes of the
    last word idle."""
    values = kernel(name).template_values
    slots = kernel(name).invocations // 4
    capacity = 3 * slots * values["U"] + 7
    runs = (1, slots * values["U"] + 1, capacity)           # contexts

    async def main(group, dim):
        kv_heads = 2
        heads = group * kv_heads
        rng = np.random.default_rng(group * dim)
        k_host, v_host = (rng.uniform(-1, 1, (capacity, kv_heads, dim)).astype(np.float32) for _ in range(2))
        q_host = rng.uniform(-1, 1, (1, heads, dim)).astype(np.float32)
        runtime, cache, scratch, q, out = await _decode_setup(k_host, v_host, q_host, f16)
        plan = Plan(runtime, "attn", live={"tokens": 1, "pos": 0})
        await plan.add(sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=runtime.device.adapter,
                            force="sdpa_decode_subgroup", decode_kernel=name))
        plan.record()
        outputs = []
        for ctx in runs:
            plan.resize(pos=ctx - 1)
            assert list((await plan.replay()).routes) == _attested("sdpa_decode_subgroup", f16)
            outputs.append(np.frombuffer(await runtime.device.read_buffer(out.buffer), np.float32).reshape(q_host.shape))
        plan.release()
        return runtime.device.adapter.info, (k_host, v_host, q_host), outputs

    dims = (40, 32 * values["W"])
    for group, dim in ((1, dims[1]), (3, dims[0]), (4, dims[1])):
        info, (k_host, v_host, q_host), outputs = asyncio.run(main(group, dim))
        k16, v16 = (host.astype(np.float16).astype(np.float64) for host in (k_host, v_host))
        for ctx, got in zip(runs, outputs):
            exact, bound = attention_reference(q_host, k16, v16, ctx - 1, 1 / dim ** 0.5, "sdpa_decode_subgroup", info,
                                               decode_kernel=name)
            assert np.all(np.abs(got - exact) <= bound), (name, group, dim, ctx, float(np.abs(got - exact).max()))


@pytest.mark.parametrize("name, f16", _spellings("sdpa_prefill_sg_"))
def test_every_subgroup_prefill_variant_matches_the_oracle(name, f16):
    """Shipped and sweep variants alike, at every G a workgroup's rows take (1 to 8, and 3: rows left idle)
    over prefills from position 0 and from inside the context: a token alone, fewer tokens than a
    workgroup owns, and several workgroups of them (the last one partly filled)."""
    values = kernel(name).template_values
    dim, kv_heads, capacity = 8 * values["SUB"] * values["W"], 2, 160
    rng = np.random.default_rng(11)
    k_host, v_host = (rng.uniform(-1, 1, (capacity, kv_heads, dim)).astype(np.float32) for _ in range(2))
    k16, v16 = (host.astype(np.float16).astype(np.float64) for host in (k_host, v_host))
    lengths = ((2, 0), (5, 97), (75, 0), (61, 99))
    runs = [(group, *lengths[(i + shift) % 4]) for shift in (0, 2) for i, group in enumerate((1, 3, 4, 8))]

    async def main():
        runtime = await Runtime.create("native")
        narrowest = runtime.device.adapter.info.get("subgroupMinSize") or 4
        if values["SUB"] > narrowest:           # the route's guard refuses it here (checked on the H200)
            return None, f"{name} needs subgroups of {values['SUB']}; this adapter's smallest is {narrowest}"
        cache = await KVCache.allocate(runtime, "c", capacity=capacity, kv_heads=kv_heads, head_dim=dim, f16=f16)
        k, v = [await tensor(runtime, role, (capacity, kv_heads, dim)) for role in ("k", "v")]
        runtime.device.write_buffer(k.buffer, k_host.tobytes())
        runtime.device.write_buffer(v.buffer, v_host.tobytes())
        await run_op(runtime, kv_cache_write(k=k, v=v, cache=cache, tokens=capacity, pos=0))
        results = []
        for group, tokens, pos in runs:
            if group > subgroup_prefill_rows(kernel(name)):    # (the guard refuses it: tested in test_routes)
                results.append(None)
                continue
            heads = group * kv_heads
            q_host = rng.uniform(-1, 1, (tokens, heads, dim)).astype(np.float32)
            scratch = await AttentionScratch.allocate(runtime, f"s{group}.{tokens}", heads=heads, head_dim=dim,
                                                      max_tokens=tokens, capacity=capacity)
            q, out = [await tensor(runtime, f"{role}{group}.{tokens}", (tokens, heads, dim)) for role in ("q", "o")]
            runtime.device.write_buffer(q.buffer, q_host.tobytes())
            op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=runtime.device.adapter,
                      force="sdpa_prefill_subgroup", prefill_kernel=name, tokens=tokens, pos=pos)
            assert [call.kernel for call in op.calls] == [kv_f16_twins()[name] if f16 else name]
            got = await run_op(runtime, op, read=[out])
            results.append((q_host, np.frombuffer(got[out.name], np.float32).reshape(q_host.shape)))
        return runtime.device.adapter.info, results

    info, results = asyncio.run(main())
    if info is None:
        pytest.skip(results)
    assert sum(r is not None for r in results) >= 4
    for (group, tokens, pos), result in zip(runs, results):
        if result is None:
            continue
        q_host, got = result
        exact, bound = attention_reference(q_host, k16, v16, pos, 1 / dim ** 0.5, "sdpa_prefill_subgroup", info,
                                           prefill_kernel=name)
        assert np.all(np.abs(got - exact) <= bound), (name, group, tokens, pos, float(np.abs(got - exact).max()))


@pytest.mark.parametrize("config", [LLAMA_3_2_1B, QWEN3_0_6B], ids=lambda c: c.key)
def test_rope_fused_with_the_cache_write_matches_float64(config):
    """One dispatch for rope(q), rope(k) and kv_cache_write, in both pair layouts (Llama interleaved,
    Qwen3 rotate-half), over a 5-token prefill at position 290 and then a decode step at 295 in the same
    plan: q against the float64 rotation within rope's bound, the cache's K within that bound plus one
    f16 spacing (pack2x16float rounds either way), V an f16 rounding of its input, other rows untouched."""
    heads, kv_heads, dim, layout = config.heads, config.kv_heads, config.head_dim, config.rope_layout
    capacity, rows, pos = 300, 298, 290          # the table covers the steps, the cache more
    rng = np.random.default_rng(3)
    steps = [(5, pos), (1, pos + 5)]
    hosts = [{"q": rng.uniform(-2, 2, (5, heads, dim)), "k": rng.uniform(-2, 2, (5, kv_heads, dim)),
              "v": rng.uniform(-2, 2, (5, kv_heads, dim))} for _ in steps]
    hosts = [{role: values.astype(np.float32) for role, values in host.items()} for host in hosts]

    async def main():
        runtime = await Runtime.create("native")
        cache = await KVCache.allocate(runtime, "c", capacity=capacity, kv_heads=kv_heads, head_dim=dim)
        table = await tensor(runtime, "table", (rows, dim // 2, 2))
        runtime.device.write_buffer(table.buffer, cos_sin_table(
            inverse_frequencies(dim, config.rope_theta, config.rope_scaling), rows))
        q, q_out = [await tensor(runtime, role, (5, heads, dim)) for role in ("q", "q_out")]
        k, v = [await tensor(runtime, role, (5, kv_heads, dim)) for role in ("k", "v")]
        plan = Plan(runtime, "rope_kv", live={"tokens": 5, "pos": pos})
        await plan.add(rope_kv_cache_write(q=q, k=k, v=v, q_out=q_out, table=table, cache=cache, heads=heads,
                                           layout=layout))
        plan.record()
        outputs = []
        for (tokens, start), host in zip(steps, hosts):
            for target, role in ((q, "q"), (k, "k"), (v, "v")):
                runtime.device.write_buffer(target.buffer, host[role].tobytes())
            plan.resize(tokens=tokens, pos=start)
            assert list((await plan.replay()).routes) == ["rope_kv_cache_write"]
            outputs.append(np.frombuffer(await runtime.device.read_buffer(q_out.buffer), np.float32))
        caches = [np.frombuffer(await runtime.device.read_buffer(t.buffer), np.uint16).view(np.float16) for t in
                  (cache.k, cache.v)]
        return outputs, caches

    outputs, (k_cache, v_cache) = asyncio.run(main())
    k_cache, v_cache = (c.reshape(capacity, kv_heads, dim).astype(np.float64) for c in (k_cache, v_cache))
    llama3 = config.rope_scaling is not None
    for (tokens, start), host, got in zip(steps, hosts, outputs):
        positions = np.arange(start, start + tokens)
        cos, sin = rope_cos_sin_reference(dim, config.rope_theta, llama3, positions)
        q_exact, q_bound = rope_reference(host["q"][:tokens], cos, sin, layout, positions)
        assert np.all(np.abs(got.reshape(5, heads, dim)[:tokens] - q_exact) <= q_bound)
        k_exact, k_bound = rope_reference(host["k"][:tokens], cos, sin, layout, positions)
        spacing = np.spacing((np.abs(k_exact) + k_bound).astype(np.float16)).astype(np.float64)
        assert np.all(np.abs(k_cache[start:start + tokens] - k_exact) <= k_bound + spacing)
        lo, hi, _ = f16_allowed(host["v"][:tokens].astype(np.float64))
        stored = v_cache[start:start + tokens]
        assert np.all((stored == lo) | (stored == hi))
    assert not k_cache[:pos].any() and not k_cache[pos + 6:].any() and not v_cache[pos + 6:].any()


@pytest.mark.parametrize("route, f16", [("flash", False), ("sdpa_decode_subgroup", False),
                                       ("sdpa_decode_subgroup", True)])
@pytest.mark.parametrize("dim", [64, 128])
def test_the_decode_quantizes_its_output_as_quantize_activations_bit_for_bit(dim, route, f16):
    """sdpa(int8=...): a decode's FlashDecoding reduce, or the one pass (also its kvf16_ twin, the cache in
    shader-f16 types), also writes its row as int8 for the int8x o-proj; the words and stats must be
    quantize_activations' of the same f32 output, bit for bit (one group per head at D 64, two at D 128),
    including a head of zeros (scale 0), and that output the float64 oracle's within its bound."""
    from py_runtime.ops.int8_activations import Int8Activations, quantize_activations

    heads, kv_heads, capacity, pos = 8, 2, 64, 40
    rng = np.random.default_rng(dim)

    async def main():
        runtime = await Runtime.create("native")
        adapter = runtime.device.adapter
        cache = await KVCache.allocate(runtime, "c", capacity=capacity, kv_heads=kv_heads, head_dim=dim, f16=f16)
        scratch = await AttentionScratch.allocate(runtime, "s", heads=heads, head_dim=dim, max_tokens=1,
                                                  capacity=capacity)
        keys = rng.uniform(-2, 2, (capacity, kv_heads, dim)).astype(np.float32)
        values = rng.uniform(-3, 3, (capacity, kv_heads, dim)).astype(np.float32)
        values[:, 1] = 0.0                      # the heads of KV head 1 attend to zeros
        k = await tensor(runtime, "k", (capacity, kv_heads, dim), data=keys.tobytes())
        v = await tensor(runtime, "v", (capacity, kv_heads, dim), data=values.tobytes())
        await run_op(runtime, kv_cache_write(k=k, v=v, cache=cache), tokens=capacity, pos=0)
        queries = rng.uniform(-1, 1, (1, heads, dim)).astype(np.float32)
        q = await tensor(runtime, "q", (1, heads, dim), data=queries.tobytes())
        out = await tensor(runtime, "out", (1, heads, dim))
        rows = Tensor(out.name, (1, heads * dim), "f32", out.usage, out.buffer)
        fused, alone = (await Int8Activations.allocate(runtime, rows, 64), await Int8Activations.allocate(
            runtime, Tensor("out2", (1, heads * dim), "f32", out.usage, out.buffer), 64))
        flash = "sdpa_flash_subgroup" if dim == 64 else "sdpa_flash_decode"    # (G 4 of 128 dims: workgroup memory)
        op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=adapter, int8=fused,
                  force=flash if route == "flash" else route)
        last = [c.kernel for c in op.calls if c.phase == "decode"][-1]
        one_pass = ("kvf16_" if f16 else "") + "sdpa_decode_sg_i8x_"
        assert last.startswith(one_pass) if route == "sdpa_decode_subgroup" else last == "sdpa_flash_reduce_i8x"
        got = await run_op(runtime, op, quantize_activations(alone), read=[out, fused.words, fused.stats, alone.words,
                                                                          alone.stats], tokens=1, pos=pos)
        return got, (fused, alone), (keys, values, queries), op.calls[0].route, adapter.info

    got, (fused, alone), (keys, values, queries), ran, info = asyncio.run(main())
    k16, v16 = (host.astype(np.float16).astype(np.float64) for host in (keys, values))   # within f16's normal range
    exact, bound = attention_reference(queries, k16, v16, pos, 1 / dim ** 0.5, ran, info)
    output = np.frombuffer(got["out"], np.float32).reshape(queries.shape)
    assert np.all(np.abs(output - exact) <= bound), float(np.abs(output - exact).max())
    assert got[fused.words.name] == got[alone.words.name]
    assert got[fused.stats.name] == got[alone.stats.name]
    stats = np.frombuffer(got[fused.stats.name], np.float32).reshape(-1, 2)
    assert (stats[:, 0] == 0).sum() == (stats.shape[0] // 2) and (stats[:, 0] > 0).sum() == stats.shape[0] // 2


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_the_fused_qkv_applies_rope_and_writes_the_cache_as_rope_kv_cache_write_bit_for_bit(layout):
    """q4_linear_qkv(rope=...): the decode QKV GEMV also rotates q and k and writes the KV cache; its q_out
    and both caches must be rope_kv_cache_write's of the plain QKV GEMV's q, k and v, bit for bit, for
    every variant of the kind, with and without subgroups and the row-major scale copy, at a position
    that adds the cache's GPU-side offset; the cache's other rows stay untouched."""
    from dataclasses import replace

    from py_runtime.checks.q4_linear import ACT_RANGE, WEIGHT_RANGE
    from py_runtime.ops.int8_activations import Int8Activations, quantize_activations
    from py_runtime.ops.q4 import Q4Weight, q4_quantize, q4_scales_rows
    from py_runtime.ops.q4_linear import QKVRope, gemv_shapes, q4_linear_qkv
    from py_runtime.ops.rope import cos_sin_table_gpu
    from py_runtime.ops.synth import fill_uniform

    k_in, heads, kv_heads, dim, gs, capacity, pos, offset = 256, 4, 2, 64, 64, 16, 5, 3
    n_q, n_kv = heads * dim, kv_heads * dim
    n = n_q + 2 * n_kv

    async def main():
        runtime = await Runtime.create("native")
        adapter = runtime.device.adapter
        without = replace(adapter, device_features=tuple(f for f in adapter.device_features if f != "subgroups"))
        packed = await tensor(runtime, "w.packed", (n * k_in // 8,), dtype="u32")
        scales = await tensor(runtime, "w.scales", (k_in // gs * n,))
        rows = await tensor(runtime, "w.rows", (k_in // gs * n,))
        x = await tensor(runtime, "x", (1, k_in))
        act = await Int8Activations.allocate(runtime, x, gs)
        weight = Q4Weight(packed, scales, k_in, n, gs, scales_rows=rows)
        table = await tensor(runtime, "table", (capacity, dim // 2, 2))
        await cos_sin_table_gpu(runtime, table, inverse_frequencies(dim, 10000.0))
        await run_op(runtime, q4_quantize(weight=weight, synth=(WEIGHT_RANGE, 3, 50)), q4_scales_rows(weight),
                     fill_uniform(target=x, value_range=ACT_RANGE, seed=3, stream=51), quantize_activations(act),
                     tokens=1)
        q, k, v = (await tensor(runtime, "q", (1, heads, dim)), await tensor(runtime, "k", (1, kv_heads, dim)),
                   await tensor(runtime, "v", (1, kv_heads, dim)))
        flat = tuple(Tensor(t.name, (1, t.shape[1] * dim), "f32", t.usage, t.buffer) for t in (q, k, v))
        results = {}
        for rows_copy in (False, True):
            w = weight if rows_copy else Q4Weight(packed, scales, k_in, n, gs)
            for name, device in (("sg", adapter), ("wg", without)):
                for shape in gemv_shapes(f"int8x_qkv_rope_{layout}"):
                    plain_cache = await KVCache.allocate(runtime, "plain", capacity=capacity, kv_heads=kv_heads,
                                                         head_dim=dim)
                    fused_cache = await KVCache.allocate(runtime, "fused", capacity=capacity, kv_heads=kv_heads,
                                                         head_dim=dim)
                    for cache in (plain_cache, fused_cache):
                        runtime.device.write_buffer(cache.offset.buffer, offset.to_bytes(4, "little"))
                    plain_q, fused_q = await tensor(runtime, "plain_q", (1, heads, dim)), await tensor(
                        runtime, "fused_q", (1, heads, dim))
                    fused = q4_linear_qkv(x=x, weight=w, outs=flat, adapter=device, int8=act, gemv_shape=shape,
                                          rope=QKVRope(q_out=fused_q, table=table, cache=fused_cache, layout=layout,
                                                       pos=pos))
                    kernel_name = fused.at(1)[0].kernel
                    assert kernel_name == (f"q4gsw_gemv_i8x_qkv_rope_{layout}{'_sr' if rows_copy else ''}_{name}_"
                                           f"{shape}"), kernel_name
                    plain = q4_linear_qkv(x=x, weight=w, outs=flat, adapter=device, int8=act, gemv_shape="r2u2w1")
                    assert plain.at(1)[0].route == "q4_gemv_int8x_qkv"
                    got = await run_op(runtime, fused, plain,
                                       rope_kv_cache_write(q=q, k=k, v=v, q_out=plain_q, table=table, cache=plain_cache,
                                                           heads=heads, layout=layout, pos=pos),
                                       read=[fused_q, plain_q, fused_cache.k, plain_cache.k, fused_cache.v,
                                             plain_cache.v], tokens=1)
                    results[kernel_name] = [got[t.name] for t in (fused_q, plain_q, fused_cache.k, plain_cache.k,
                                                                 fused_cache.v, plain_cache.v)]
                    for t in (plain_q, fused_q, plain_cache.k, plain_cache.v, plain_cache.offset, fused_cache.k,
                              fused_cache.v, fused_cache.offset):
                        runtime.tensors.release(t.name)
        return results

    results = asyncio.run(main())
    assert len(results) == 2 * 2 * len(gemv_shapes(f"int8x_qkv_rope_{layout}"))
    row_words = kv_heads * dim // 2
    for kernel_name, (fused_q, plain_q, fused_k, plain_k, fused_v, plain_v) in results.items():
        assert fused_q == plain_q, f"{kernel_name}: the rotated q differs from rope_kv_cache_write's"
        assert fused_k == plain_k, f"{kernel_name}: the K cache differs"
        assert fused_v == plain_v, f"{kernel_name}: the V cache differs"
        words = np.frombuffer(fused_k, np.uint32).reshape(capacity, row_words)
        written = pos + offset
        assert words[written].all() and not np.delete(words, written, axis=0).any(), kernel_name
        assert np.frombuffer(fused_v, np.uint32).reshape(capacity, row_words)[written].all()
