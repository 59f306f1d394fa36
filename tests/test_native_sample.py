"""The GPU sampler (ops/sample.py, shaders/llm/sample.wgsl) on the native backend against its float64 oracle
(host/oracle/sampling.py): every pick over vocabulary sizes, options, seeds and positions is one the oracle
accepts (exactly its pick where the draw is not within the f32 bound of a boundary); greedy settings equal
argmax; ties break by the lower index at the top and at the k-th place; the oracle is proven to refuse wrong
picks; bad options are refused; a decoder that samples is reproducible for a seed, whichever side keeps the
position, and attests `sample`; the model bench samples when asked."""

from __future__ import annotations

import asyncio
import struct

import numpy as np
import pytest

from py_runtime.dispatch import POS, TOKENS
from py_runtime.host.oracle.sampling import expected_pick, lowbias32_np, order_keys_np, uniform_draw_np
from py_runtime.models.config import TINY
from py_runtime.models.decoder import Decoder
from py_runtime.ops.argmax import argmax, argmax_blocks_needed
from py_runtime.ops.sample import TOP_K_CAP, Sampling, sample, sample_candidates_needed
from py_runtime.ops.sequence import TokenHistory
from py_runtime.plan import Plan
from py_runtime.runtime import Runtime

SIZES = (49152, 151936, 30001, 40)     # SmolLM2's and Qwen3's vocabularies, a partial last block, fewer than k
LARGEST = max(SIZES)
OPTIONS = (Sampling(temperature=1.0, top_k=50, top_p=1.0),
           Sampling(temperature=0.7, top_k=64, top_p=0.9),
           Sampling(temperature=1.5, top_k=20, top_p=0.5),
           Sampling(temperature=2.0, top_k=8, top_p=1.0),
           Sampling(temperature=1.0, top_k=64, top_p=0.05))
SEEDS = (0, 12345, 2**32 - 1)
POSITIONS = (0, 1, 2, 3, 17, 100, 101, 513, 4095, 4096, 70000, 2**32 - 2)


class Sampler:
    """One runtime with buffers for the largest vocabulary; `picks` runs the two passes (and argmax) per position."""

    def __init__(self):
        self.runtime = None

    async def start(self):
        self.runtime = runtime = await Runtime.create("native")
        allocate = runtime.tensors.allocate
        self.values = await allocate("sample.values", (LARGEST,))
        self.keys = await allocate("sample.keys", (sample_candidates_needed(LARGEST),), "u32")
        self.index = await allocate("sample.index", (sample_candidates_needed(LARGEST),), "u32")
        self.result = await allocate("sample.result", (1,), "u32")
        self.offset = await allocate("sample.offset", (1,), "u32")
        self.block_keys = await allocate("argmax.keys", (argmax_blocks_needed(LARGEST),), "u32")
        self.block_index = await allocate("argmax.index", (argmax_blocks_needed(LARGEST),), "u32")
        self.argmax_result = await allocate("argmax.result", (1,), "u32")

    async def picks(self, logits: np.ndarray, sampling: Sampling, positions, offset: int = 0) -> tuple[list, int, tuple]:
        """The sampled id at each position (pos + 1 token + offset), argmax's id, and the routes attested."""
        device, n = self.runtime.device, logits.size
        device.write_buffer(self.values.buffer, np.ascontiguousarray(logits, np.float32).tobytes())
        device.write_buffer(self.offset.buffer, struct.pack("<I", offset))
        plan = Plan(self.runtime, "sample", live={TOKENS: 1, POS: 0})
        await plan.add(sample(values=self.values, candidate_keys=self.keys, candidate_index=self.index,
                              result=self.result, offset=self.offset, sampling=sampling, length=n))
        plan.record()
        greedy = Plan(self.runtime, "argmax", live={"n": n})
        await greedy.add(argmax(values=self.values, block_keys=self.block_keys, block_index=self.block_index,
                                result=self.argmax_result, length="n"))
        greedy.record()
        ids, routes = [], ()
        try:
            for position in positions:
                plan.resize(pos=position - 1 - offset)
                routes = (await plan.replay()).routes
                ids.append(struct.unpack("<I", await device.read_buffer(self.result.buffer, 4))[0])
            await greedy.replay()
            best = struct.unpack("<I", await device.read_buffer(self.argmax_result.buffer, 4))[0]
        finally:
            plan.release()
            greedy.release()
        return ids, best, routes


@pytest.fixture(scope="module")
def sampler():
    s = Sampler()
    asyncio.run(s.start())
    return s


def _run(sampler, *args, **kwargs):
    return asyncio.run(sampler.picks(*args, **kwargs))


def _logits(n: int, seed: int, scale: float = 3.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * scale).astype(np.float32)


def _check(sampler, logits, options, seeds=SEEDS, positions=POSITIONS) -> tuple[int, int, list]:
    """Every pick against the oracle; returns (cases, ambiguous cases, picks)."""
    cases = ambiguous = 0
    picks = []
    for base in options:
        for seed in seeds:
            sampling = Sampling(**{**base.to_json(), "seed": seed})
            ids, _, routes = _run(sampler, logits, sampling, positions)
            assert routes == ("sample",)
            for position, got in zip(positions, ids):
                want = expected_pick(logits, **sampling.to_json(), position=position)
                where = f"n={logits.size} {sampling} position {position} (u={want.u})"
                assert got in want.acceptable, f"{where}: GPU picked {got}; the oracle accepts {sorted(want.acceptable)}"
                if not want.ambiguous:
                    assert got == want.token, where
                cases += 1
                ambiguous += want.ambiguous
                picks.append(got)
    return cases, ambiguous, picks


@pytest.mark.parametrize("n", SIZES)
def test_sampled_ids_equal_the_float64_oracle(sampler, n):
    cases, ambiguous, picks = _check(sampler, _logits(n, n), OPTIONS)
    assert ambiguous <= cases // 50, f"{ambiguous} of {cases} draws within the bound: the bound is too loose to judge"
    assert len(set(picks)) > 5, "the sampler keeps picking the same few ids: nothing was sampled"


def test_greedy_settings_equal_argmax_exactly(sampler):
    for n in SIZES:
        logits = _logits(n, 7 * n)
        for sampling in (Sampling(temperature=0, top_k=64, seed=3), Sampling(temperature=1.0, top_k=1, seed=3)):
            ids, best, _ = _run(sampler, logits, sampling, (5, 6, 9000))
            assert ids == [best] * 3 == [int(np.argmax(logits))] * 3, (n, sampling)


def test_ties_break_by_the_lower_index_at_the_top_and_at_the_kth_place(sampler):
    """100 equal maxima spread over every block: the top 64 are the 64 lowest of them, each drawn with
    probability 1/64 (so the pick is the floor(64 u)-th); argmax (and greedy sampling) takes the lowest."""
    n = 151936
    logits = _logits(n, 1, scale=1.0)
    spots = np.sort(np.random.default_rng(2).choice(n, 100, replace=False))
    logits[spots] = 50.0
    positions = tuple(range(40))
    ids, best, _ = _run(sampler, logits, Sampling(temperature=1.0, top_k=64, seed=9), positions)
    assert best == spots[0]
    for position, got in zip(positions, ids):
        u = float(uniform_draw_np(9, position))
        assert got == spots[int(u * 64)], (position, u)
    greedy, _, _ = _run(sampler, logits, Sampling(temperature=0, seed=9), (3,))
    assert greedy == [spots[0]]


@pytest.mark.parametrize("levels", [1, 2, 3, 7, 300])
def test_logits_of_few_values_are_sampled_as_the_oracle_samples_them(sampler, levels):
    """Logits of `levels` distinct values (ties everywhere): the radix select ends in the key rounds where a bin
    settles the top k, or goes on into the index rounds where the k-th place is a tie; every k, block sizes
    below and above the workgroup's."""
    rng = np.random.default_rng(levels)
    for n in (40, 30001):
        logits = (rng.integers(0, levels, n) * 0.25).astype(np.float32)
        _check(sampler, logits, [Sampling(temperature=1.0, top_k=k, top_p=0.9) for k in (1, 2, 17, 64)],
               seeds=(1, 2), positions=(0, 5))


def test_nan_and_infinite_tops_are_greedy_and_minus_infinity_is_never_drawn(sampler):
    n = 30001
    logits = _logits(n, 5)
    logits[:n - 3] = -np.inf                  # three finite candidates, the rest -inf
    logits[n - 3:] = (1.0, 1.5, 0.5)
    ids, _, _ = _run(sampler, logits, Sampling(temperature=1.0, top_k=64, seed=1), range(30))
    assert set(ids) <= {n - 3, n - 2, n - 1} and len(set(ids)) > 1
    logits[100] = np.inf
    ids, best, _ = _run(sampler, logits, Sampling(temperature=1.0, top_k=64, seed=1), range(5))
    assert ids == [best] * 5 and best == 100
    logits[200] = np.nan                        # NaN ranks above +inf, as in argmax
    ids, best, _ = _run(sampler, logits, Sampling(temperature=1.0, top_k=64, seed=1), range(5))
    assert ids == [best] * 5 and best == 200


def test_a_draw_on_a_boundary_is_ambiguous_and_either_neighbour_is_accepted(sampler):
    """Two candidates whose first's share rounds to the draw's u: the oracle accepts both, the GPU picks one."""
    position, seed = 11, 3
    u = float(uniform_draw_np(seed, position))
    logits = np.full(4096, -20.0, np.float32)
    logits[7], logits[9] = 0.0, np.log(1 / u - 1)      # share of id 7: 1 / (1 + e^l9) = u, up to f32 rounding
    want = expected_pick(logits, temperature=1.0, top_k=2, top_p=1.0, seed=seed, position=position)
    assert want.ambiguous and want.acceptable == {7, 9}
    ids, _, _ = _run(sampler, logits, Sampling(temperature=1.0, top_k=2, seed=seed), (position,))
    assert ids[0] in want.acceptable
    clear = expected_pick(logits, temperature=1.0, top_k=2, top_p=1.0, seed=seed, position=position + 1)
    assert not clear.ambiguous


def test_the_offset_on_the_gpu_moves_the_draw_like_the_host_position(sampler):
    logits = _logits(49152, 11)
    sampling = Sampling(temperature=1.0, top_k=64, seed=4)
    host, _, _ = _run(sampler, logits, sampling, (100, 101, 102, 103))
    gpu, _, _ = _run(sampler, logits, sampling, (100, 101, 102, 103), offset=90)
    assert host == gpu


def test_the_pick_pass_stores_the_draw_in_the_token_history(sampler):
    """sample(history=): the same draw as without it, stored at its position (pos + 1 + offset) and nowhere
    else, the offset advanced by the step's token; a history at another offset is refused."""
    logits = _logits(49152, 13)
    sampling = Sampling(temperature=1.0, top_k=64, seed=8)
    positions, offset = (5, 9, 14), 3
    plain, _, _ = _run(sampler, logits, sampling, positions, offset=offset)

    async def stored():
        runtime, allocate = sampler.runtime, sampler.runtime.tensors.allocate
        history = await allocate("sample.history", (16,), "u32")
        where = TokenHistory(history, sampler.offset, advance=True)
        plan = Plan(runtime, "sample.history", live={TOKENS: 1, POS: 0})
        await plan.add(sample(values=sampler.values, candidate_keys=sampler.keys, candidate_index=sampler.index,
                              result=sampler.result, offset=sampler.offset, sampling=sampling, length=logits.size,
                              history=where))
        plan.record()
        runs = []
        try:
            for position in positions:
                runtime.device.write_buffer(history.buffer, b"\xff" * 64)
                runtime.device.write_buffer(sampler.offset.buffer, struct.pack("<I", offset))
                plan.resize(pos=position - 1 - offset)
                routes = (await plan.replay()).routes
                words = struct.unpack("<16I", await runtime.device.read_buffer(history.buffer, 64))
                (advanced,) = struct.unpack("<I", await runtime.device.read_buffer(sampler.offset.buffer, 4))
                (picked,) = struct.unpack("<I", await runtime.device.read_buffer(sampler.result.buffer, 4))
                runs.append((picked, words, advanced, routes))
        finally:
            plan.release()
            runtime.tensors.release(history.name)
        return runs

    for position, want, (picked, words, advanced, routes) in zip(positions, plain, asyncio.run(stored())):
        assert picked == want and routes == ("sample",), (position, picked, want)
        assert words[position] == want and advanced == offset + 1, (position, words, advanced)
        assert all(w == 0xFFFFFFFF for i, w in enumerate(words) if i != position), (position, words)
    from py_runtime.tensors import Tensor
    other = Tensor("other", (1,), "u32", 0)
    with pytest.raises(ValueError, match="the token history must share its offset"):
        sample(values=sampler.values, candidate_keys=sampler.keys, candidate_index=sampler.index, result=sampler.result,
               offset=sampler.offset, sampling=sampling, history=TokenHistory(Tensor("h", (8,), "u32", 0), other))


def test_the_oracle_refuses_wrong_picks(sampler):
    """The verifier fails: another seed's or position's answer, and a highest-index tie-break, are refused."""
    logits = _logits(49152, 3)
    sampling = Sampling(temperature=1.0, top_k=64, seed=5)
    positions = tuple(range(30))
    ids, _, _ = _run(sampler, logits, sampling, positions)
    wrong_seed = sum(got not in expected_pick(logits, **{**sampling.to_json(), "seed": 6}, position=p).acceptable
                     for p, got in zip(positions, ids))
    wrong_position = sum(got not in expected_pick(logits, **sampling.to_json(), position=p + 1).acceptable
                         for p, got in zip(positions, ids))
    assert wrong_seed > 15 and wrong_position > 15
    tied = np.zeros(4096, np.float32)
    assert expected_pick(tied, temperature=0, top_k=64, top_p=1, seed=0, position=0).acceptable == {0}


def _lowbias32(x: int) -> int:
    """The hash as Wellons publishes it, in plain integers: the numpy twin must agree bit for bit."""
    x ^= x >> 16
    x = x * 0x7FEB352D % 2**32
    x ^= x >> 15
    x = x * 0x846CA68B % 2**32
    return x ^ (x >> 16)


def test_the_hash_twin_and_the_key_order():
    inputs = np.random.default_rng(0).integers(0, 2**32, 1000, dtype=np.uint64)
    assert [int(h) for h in lowbias32_np(inputs)] == [_lowbias32(int(x)) for x in inputs]
    u = uniform_draw_np(0, np.arange(100000))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005      # 5 sigma is 0.0046
    assert np.all(u * 2**24 == np.floor(u * 2**24))                          # 24 bits: exact in f32
    keys = order_keys_np(np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32))
    assert keys[2] == keys[3] and all(keys[i] < keys[i + 1] for i in (0, 1, 3, 4, 5))


@pytest.mark.parametrize("options, message", [
    ({"top_p": 0}, r"top_p 0 must be a number in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p 1.5 must be a number in \(0, 1\]"),
    ({"temperature": -0.5}, r"temperature -0.5 must be 0 \(greedy\) or a finite number >= 0.001"),
    ({"temperature": float("nan")}, r"temperature nan must be 0"),
    ({"top_k": TOP_K_CAP + 1}, r"top_k 65 must be an integer 1..64 \(the sampler ranks at most 64"),
    ({"top_k": 0}, r"top_k 0 must be an integer 1..64"),
    ({"seed": -1}, r"seed -1 must be an integer 0..2\*\*32-1"),
    ({"top_k": 2.0}, r"top_k 2.0 must be an integer"),
])
def test_bad_options_are_refused_with_what_was_wrong(options, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**options)


def test_greedy_options_keep_argmax():
    assert Sampling.or_greedy(temperature=0, top_k=50, top_p=1.0, seed=0) is None
    assert Sampling.or_greedy(temperature=0.8, top_k=1, top_p=1.0, seed=0) is None
    assert Sampling.or_greedy(temperature=0.8, top_k=40, top_p=0.9, seed=2) == Sampling(temperature=0.8, top_k=40,
                                                                                          top_p=0.9, seed=2)
    with pytest.raises(ValueError, match="top_p 2"):
        Sampling.or_greedy(temperature=0, top_k=50, top_p=2, seed=0)


def test_sample_refuses_candidate_buffers_too_small():
    from py_runtime.tensors import Tensor
    t = lambda name, n, dtype="u32": Tensor(name, (n,), dtype, 0)  # noqa: E731
    with pytest.raises(ValueError, match=r"candidate buffers hold 64 elements; 2049 logits need 128"):
        sample(values=t("v", 2049, "f32"), candidate_keys=t("k", 64), candidate_index=t("i", 64), result=t("r", 1),
               offset=t("o", 1), sampling=Sampling())


def test_a_head_writing_the_next_input_needs_a_token_history_and_a_row_for_every_id():
    """argmax(embed=) and sample(embed=) refuse, by name, a row written with no token history and an embedding
    with fewer rows than the head has values."""
    from py_runtime.ops.q4 import Q4Weight
    from py_runtime.ops.sequence import NextInput
    from py_runtime.tensors import Tensor

    def t(name, n, dtype="u32"):
        return Tensor(name, (n,), dtype, 0)

    def row(vocab):
        weight = Q4Weight(t("embed.packed", vocab * 8), t("embed.scales", vocab, "f32"), 64, vocab, 64)
        return NextInput(weight, Tensor("h", (1, 64), "f32", 0))

    offset = t("o", 1)
    history = TokenHistory(t("history", 8), offset)
    heads = {"argmax": lambda **kw: argmax(values=t("v", 100, "f32"), block_keys=t("k", 8), block_index=t("i", 8),
                                           result=t("r", 1), **kw),
             "sample": lambda **kw: sample(values=t("v", 100, "f32"), candidate_keys=t("k", 64),
                                           candidate_index=t("i", 64), result=t("r", 1), offset=offset,
                                           sampling=Sampling(), **kw)}
    for head, build in heads.items():
        build(history=history, embed=row(100))
        with pytest.raises(ValueError, match=f"{head}: embed= \\(the next step's input\\) goes with a token "
                                             "history"):
            build(embed=row(100))
        with pytest.raises(ValueError, match=f"{head}\\(v\\): 100 values, but the embedding embed.packed has "
                                             "only 99 rows"):
            build(history=history, embed=row(99))


def _decode(sampling, *, gpu_position=None, steps=12) -> tuple[list, tuple]:
    async def main():
        runtime = await Runtime.create("native")
        decoder = await Decoder.create(runtime, TINY, seed=1, max_prompt=4, capacity=4 + steps + 1,
                                       gpu_position=gpu_position, sampling=sampling)
        try:
            run = await decoder.generate([1, 2, 3, 4], steps, batch=5)
            return run["ids"], decoder.plan.routes, decoder.position_on_gpu
        finally:
            decoder.release()

    return asyncio.run(main())


def test_a_sampling_decoder_is_reproducible_for_a_seed_and_attests_sample():
    """The same ids for a seed (either side keeping the position), others for another seed; temperature 0 draws
    argmax's ids, through the sampler's own next-input rows."""
    sampling = Sampling(temperature=1.5, top_k=64, top_p=1.0, seed=42)
    first, routes, on_gpu = _decode(sampling)
    again, _, _ = _decode(sampling)
    other, _, _ = _decode(Sampling(temperature=1.5, top_k=64, top_p=1.0, seed=43))
    host_side, _, host_on_gpu = _decode(sampling, gpu_position=False)
    greedy, greedy_routes, _ = _decode(None)
    assert on_gpu and not host_on_gpu
    assert first == again == host_side, "a seed must give the same ids, whichever side keeps the position"
    assert first != other and first != greedy
    assert "sample" in routes and "argmax" not in routes
    assert "q4_embedding" not in routes, "the pick pass writes a step's input row: the step embeds nothing"
    assert "argmax" in greedy_routes and "sample" not in greedy_routes
    assert _decode(Sampling(temperature=0, seed=42))[0] == greedy


def test_the_decoder_samples_what_the_oracle_picks_from_its_logits():
    """Step by step: each token drawn equals the oracle's pick from the logits the step wrote, at its position."""
    sampling = Sampling(temperature=1.2, top_k=32, top_p=0.95, seed=7)

    async def main():
        runtime = await Runtime.create("native")
        decoder = await Decoder.create(runtime, TINY, seed=1, max_prompt=4, capacity=12, sampling=sampling)
        try:
            results = []
            await decoder.prefill([5, 6, 7])
            for _ in range(6):
                logits = np.frombuffer(await decoder.read_logits(), np.float32)
                (token,) = await decoder.tokens(decoder.position, decoder.position + 1)
                results.append((logits, decoder.position, token))
                await decoder.step(wait=True)
            return results
        finally:
            decoder.release()

    for logits, position, token in asyncio.run(main()):
        want = expected_pick(logits, **sampling.to_json(), position=position)
        assert token in want.acceptable and (want.ambiguous or token == want.token), (position, token, want)


def _bench(**sampling) -> dict:
    from py_runtime.app import run

    async def sink(name, data):
        pass

    options = {"suite": "model_bench", "model": "tiny", "prompt": 8, "decode": 6, "seed": 42, "profile": False,
               **sampling}
    return asyncio.run(run("native", options, sink))


def test_the_model_bench_samples_when_asked_and_its_reports_say_so():
    """`bench model --temperature ...`: the decode runs through the sampler (its routes, no embedding dispatch a
    step), reproducibly for a seed and not as greedy does; the report records the settings and the table says
    how the tokens were picked."""
    from py_runtime.host.report import format_model_bench

    sampled, again, greedy = _bench(temperature=1.5, top_k=64), _bench(temperature=1.5, top_k=64), _bench()
    assert sampled["options"]["sampling"] == {"temperature": 1.5, "top_k": 64, "top_p": 1.0, "seed": 42}
    assert greedy["options"]["sampling"] is None
    assert "sample" in sampled["routes"]["decode"] and "argmax" not in sampled["routes"]["decode"]
    assert "q4_embedding" not in sampled["routes"]["decode"]
    assert sampled["generated"] == again["generated"] != greedy["generated"]
    assert "6 sampled (temperature 1.5, top-k 64, top-p 1, seed 42) decode steps" in format_model_bench(sampled)
    assert "6 greedy decode steps" in format_model_bench(greedy)
