"""The workload registry: every suite the page, the CLI and the tests can run, named once.

A Workload says what a suite is (title, check or bench), which options it takes (schema.Option:
type, default, allowed values), how its Runtime is created, which runner in py_runtime/checks/
runs it and which page renderer shows its report. app.run looks suites up here; the CLI derives
its choices from here; the page gets the schemas from py_runtime.page. Runners are called as
`await runner(runtime, options, sink, progress)` with validated options (every name present).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping

from ..checks.attention import PRESETS as ATTENTION_PRESETS
from ..checks.attention_bench import ATTENTION_PRESETS as ATTENTION_BENCH_PRESETS
from ..checks.attention import run_attention_checks
from ..checks.decoder_blocks import ALLOWED_LENGTHS, MODELS, DecoderBlocksOptions, run_decoder_blocks
from ..checks.chat import run_chat
from ..checks.generate import COMPARE_SIZES, SIZES, run_compare, run_generate
from ..checks.elementwise import FAMILIES, ElementwiseOptions, run_elementwise_check
from ..checks.host_cost import run_host_cost
from ..checks.model_bench import POSITIONS, run_model_bench
from ..checks.model_soak import run_model_soak
from ..checks.model_run import ATTENTION as ATTENTION_CHOICES
from ..checks.model_run import KV_SPELLINGS
from ..checks.peer_bench import FLAVOURS, PEER_DEVICES, PEERS, run_peer_bench
from ..checks.model_run import MODEL_KEYS, POLICIES, ModelRunOptions, run_model_check
from ..checks.kernel_bench import BENCH_PRESETS, STEP_PRESETS, run_kernel_bench
from ..checks.q4_linear import PRESETS as Q4_PRESETS
from ..checks.q4_linear import run_q4_checks
from ..checks.runtime_core import run_runtime_checks
from ..checks.tokenizer import VOCABULARIES, run_tokenizer_check
from ..checks.unary import CheckOptions, run_unary_check
from ..ops.tuning import TABLE_NAMES
from ..ops.unary import UNARY_OPS
from .schema import Option, validate

__all__ = ["Workload", "WORKLOADS", "DEFAULT_SUITE", "PAGE_SUITE", "KINDS", "TUNING", "Option", "get", "by_kind",
           "schemas"]

# check: judged in the runtime and/or by the host oracle; bench: measures only; view: the page's model
# views, which run, measure and hand their logits to the dev server's oracle (the page asks it)
KINDS = ("check", "bench", "view")
Runner = Callable[..., Awaitable[dict]]


@dataclass(frozen=True, kw_only=True)
class Workload:
    name: str
    title: str
    kind: str                                   # one of KINDS
    options: tuple[Option, ...]
    runner: Runner                              # async (runtime, options, sink, progress) -> report
    renderer: str                               # the page's renderer (web/render.js RENDERERS)
    aliases: tuple[str, ...] = ()               # other names the CLI accepts (`bench kernels`)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"workload {self.name!r}: kind {self.kind!r} is not one of {list(KINDS)}")

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def validate(self, given: Mapping) -> dict:
        return validate(self.name, self.options, given)

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "kind": self.kind, "renderer": self.renderer,
                "aliases": list(self.aliases), "options": [o.to_json() for o in self.options]}


def _defaults(function) -> dict:
    """A runner's keyword defaults, so the schema does not restate them."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _sink_if(options: dict, sink):
    return sink if options["artifacts"] else None


_ARTIFACTS_OFF = Option(name="artifacts", type="bool", default=False, help="hand inputs and outputs to the sink")
_ARTIFACTS_ON = Option(name="artifacts", type="bool", default=True, help="hand outputs to the sink")
# A run-level option (app.run hands it to the runtime, not to the runner).
TUNING = Option(name="tuning", type="str", default=None, allowed=TABLE_NAMES,
                help="the tuning table every route takes its kernel variants from (default: the one the adapter's "
                     "info matches); name another to compare tables on one adapter")
_MAX_WG = Option(name="max_workgroups_per_dim", type="int", default=None, minimum=1, url="max_wg",
                 help="force 2-D grids at small sizes")


async def _unary(runtime, options, sink, progress):
    return await run_unary_check(runtime, CheckOptions(**options), sink, progress)


_UNARY = CheckOptions()
UNARY = Workload(
    name="unary", title="Unary operators against a float64 reference, checked in the runtime", kind="check",
    options=(Option(name="ops", type="str list", default=_UNARY.ops, allowed=UNARY_OPS),
             Option(name="lengths", type="int list", default=_UNARY.lengths, minimum=1),
             Option(name="seed", type="int", default=_UNARY.seed),
             Option(name="profile", type="bool", default=_UNARY.profile, help="timestamp queries"),
             _MAX_WG,
             Option(name="sample", type="int", default=_UNARY.sample, minimum=1,
                    help="elements checked in the runtime per case"),
             _ARTIFACTS_OFF),
    runner=_unary, renderer="unary")


async def _runtime_core(runtime, options, sink, progress):
    return await run_runtime_checks(runtime, seed=options["seed"], sink=_sink_if(options, sink))


RUNTIME = Workload(
    name="runtime", title="Runtime core: caching, resize, profiler, attestation, errors, device loss", kind="check",
    options=(Option(name="seed", type="int", default=_defaults(run_runtime_checks)["seed"]), _ARTIFACTS_ON),
    runner=_runtime_core, renderer="runtime")


def _preset_check(*, name: str, title: str, presets: dict, run, renderer: str) -> Workload:
    """A check whose runner takes a preset of named cases, `only` some of them, and a seed
    (run(runtime, preset=, only=, seed=, sink=, progress=)); outputs go to the sink for the oracle."""
    async def runner(runtime, options, sink, progress):
        return await run(runtime, preset=options["preset"], only=options["only"], seed=options["seed"],
                         sink=_sink_if(options, sink), progress=progress)

    defaults = _defaults(run)
    return Workload(
        name=name, title=title, kind="check",
        options=(Option(name="preset", type="str", default=defaults["preset"], allowed=tuple(presets)),
                 Option(name="only", type="str list", default=None,
                        allowed=tuple(dict.fromkeys(c.name for cases in presets.values() for c in cases)),
                        help="only these cases of the preset"),
                 Option(name="seed", type="int", default=defaults["seed"]),
                 _ARTIFACTS_ON),
        runner=runner, renderer=renderer)


Q4 = _preset_check(name="q4", title="Q4 quantizer and linear routes (outputs judged by the host oracle)",
                   presets=Q4_PRESETS, run=run_q4_checks, renderer="q4")


async def _elementwise(runtime, options, sink, progress):
    return await run_elementwise_check(runtime, ElementwiseOptions(**options), sink, progress)


_ELEMENTWISE = ElementwiseOptions()
ELEMENTWISE = Workload(
    name="elementwise", title="Binary, logical, extrema and to_copy families (values judged by the host oracle)",
    kind="check",
    options=(Option(name="families", type="str list", default=_ELEMENTWISE.families, allowed=FAMILIES),
             Option(name="seed", type="int", default=_ELEMENTWISE.seed),
             _MAX_WG,
             _ARTIFACTS_OFF),
    runner=_elementwise, renderer="elementwise")


async def _decoder_blocks(runtime, options, sink, progress):
    values = {k: v for k, v in options.items() if k != "ops"}
    return await run_decoder_blocks(runtime, DecoderBlocksOptions.with_parts(options["ops"], **values), sink, progress)


_DECODER = DecoderBlocksOptions()
DECODER_BLOCKS = Workload(
    name="decoder_blocks", title="Decoder blocks at real model shapes, and argmax (values judged by the host oracle)",
    kind="check",
    options=(Option(name="seed", type="int", default=_DECODER.seed),
             Option(name="lengths", type="int list", default=_DECODER.lengths, allowed=ALLOWED_LENGTHS,
                    help="token counts S per step"),
             Option(name="ops", type="str list", default=(*_DECODER.models, "argmax"), allowed=(*MODELS, "argmax"),
                    help="the parts to run: model geometries and/or argmax"),
             Option(name="profile", type="bool", default=_DECODER.profile, help="timestamp queries"),
             _ARTIFACTS_ON),
    runner=_decoder_blocks, renderer="decoder_blocks")


ATTENTION = _preset_check(
    name="attention", title="KV cache and attention routes over prefill and decode (outputs judged by the host oracle)",
    presets=ATTENTION_PRESETS, run=run_attention_checks, renderer="attention")


async def _model(runtime, options, sink, progress):
    return await run_model_check(runtime, ModelRunOptions(**options), sink, progress)


_MODEL = ModelRunOptions()
_ATTENTION_HELP = "attention routes: the route tables' choice, FlashDecoding at every decode context, the f16 " \
                  "subgroup-matrix prefill at every prompt length (no short-prompt handoff), or materialized at every step"
_KV_HELP = "the KV caches' kernels: f16 pairs packed in u32, or shader-f16 types where the device has the feature"
MODEL = Workload(
    name="model", title="A whole model's prefill and greedy decode (logits judged by the transformers oracle)",
    kind="check",
    options=(Option(name="model", type="str", default=_MODEL.model, allowed=MODEL_KEYS),
             Option(name="layers", type="int", default=_MODEL.layers, minimum=1, help="decoder layers (depth)"),
             Option(name="prompt", type="int", default=_MODEL.prompt, minimum=1, help="prompt tokens"),
             Option(name="decode", type="int", default=_MODEL.decode, minimum=0, help="greedy decode steps"),
             Option(name="policy", type="str", default=_MODEL.policy, allowed=POLICIES,
                    help="activations of the decode linears"),
             Option(name="seed", type="int", default=_MODEL.seed),
             Option(name="batch", type="int", default=_MODEL.batch, minimum=1,
                    help="decode steps between readbacks of the generated ids"),
             Option(name="attention", type="str", default=_MODEL.attention, allowed=ATTENTION_CHOICES,
                    help=_ATTENTION_HELP),
             Option(name="fused", type="bool", default=_MODEL.fused, help="the fused QKV and gate/up + SwiGLU routes"),
             Option(name="fuse_norm", type="bool", default=_MODEL.fuse_norm,
                    help="int8x: each decode RMSNorm inside the GEMV that reads it (its _norm route)"),
             Option(name="kv", type="str", default=_MODEL.kv, allowed=KV_SPELLINGS, help=_KV_HELP),
             TUNING, _ARTIFACTS_ON),
    runner=_model, renderer="model")


async def _model_soak(runtime, options, sink, progress):
    return await run_model_soak(runtime, **options, progress=progress)


_SOAK = _defaults(run_model_soak)
MODEL_SOAK = Workload(
    name="model_soak", title="A long greedy decode twice: identical tokens, flat memory, the context's end refused",
    kind="check",
    options=(Option(name="model", type="str", default=_SOAK["model"], allowed=MODEL_KEYS),
             Option(name="layers", type="int", default=_SOAK["layers"], minimum=1,
                    help="decoder layers (default: the model's)"),
             Option(name="prompt", type="int", default=_SOAK["prompt"], minimum=1, help="prompt tokens"),
             Option(name="steps", type="int", default=_SOAK["steps"], minimum=1, help="greedy decode steps per run"),
             Option(name="policy", type="str", default=_SOAK["policy"], allowed=POLICIES,
                    help="activations of the decode linears"),
             Option(name="seed", type="int", default=_SOAK["seed"]),
             Option(name="batch", type="int", default=_SOAK["batch"], minimum=1,
                    help="decode steps between readbacks of the generated ids")),
    runner=_model_soak, renderer="model_soak")


async def _model_bench(runtime, options, sink, progress):
    return await run_model_bench(runtime, **options, progress=progress)


_MODEL_BENCH = _defaults(run_model_bench)
# How the decode picks each token (ops/sample.py; the model bench's and the chat view's): greedy by default
_SAMPLING = (Option(name="temperature", type="float", default=_MODEL_BENCH["temperature"], minimum=0,
                    help="sample on the GPU at this temperature (0: greedy)"),
             Option(name="top_k", type="int", default=_MODEL_BENCH["top_k"], minimum=1,
                    help="sample among the k most likely tokens (1..64)"),
             Option(name="top_p", type="float", default=_MODEL_BENCH["top_p"], help="then within this nucleus mass, (0, 1]"))
MODEL_BENCH = Workload(
    name="model_bench", title="A whole model: prefill and decode tok/s, time to first token, each kernel's share",
    kind="bench",
    options=(Option(name="model", type="str", default=_MODEL_BENCH["model"], allowed=MODEL_KEYS),
             Option(name="layers", type="int", default=_MODEL_BENCH["layers"], minimum=1,
                    help="decoder layers (default: the model's)"),
             Option(name="prompt", type="int", default=_MODEL_BENCH["prompt"], minimum=1, help="prompt tokens"),
             Option(name="decode", type="int", default=_MODEL_BENCH["decode"], minimum=1, help="decode steps"),
             Option(name="policy", type="str", default=_MODEL_BENCH["policy"], allowed=POLICIES,
                    help="activations of the decode linears"),
             Option(name="seed", type="int", default=_MODEL_BENCH["seed"],
                    help="the weights', the prompt's and the sampler's seed"),
             *_SAMPLING,
             Option(name="batch", type="int", default=_MODEL_BENCH["batch"], minimum=1,
                    help="decode steps between readbacks of the generated ids"),
             Option(name="per_submit", type="int", default=_MODEL_BENCH["per_submit"], minimum=0,
                    help="decode steps per submit (0: the decoder's default)"),
             Option(name="profile", type="bool", default=_MODEL_BENCH["profile"],
                    help="one profiled prefill and decode step (each kernel's share)"),
             Option(name="context", type="int", default=_MODEL_BENCH["context"], minimum=0,
                    help="measure the decode steps ending at this position (0: right after the prompt)"),
             Option(name="position", type="str", default=_MODEL_BENCH["position"], allowed=tuple(POSITIONS),
                    help="where the sequence's position lives between decode steps"),
             Option(name="fuse_norm", type="bool", default=_MODEL_BENCH["fuse_norm"],
                    help="int8x: each decode RMSNorm inside the GEMV that reads it (its _norm route)"),
             Option(name="attention", type="str", default=_MODEL_BENCH["attention"], allowed=ATTENTION_CHOICES,
                    help=_ATTENTION_HELP),
             Option(name="kv", type="str", default=_MODEL_BENCH["kv"], allowed=KV_SPELLINGS, help=_KV_HELP),
             TUNING),
    runner=_model_bench, renderer="model_bench", aliases=("model",))


async def _peer_bench(runtime, options, sink, progress):
    return await run_peer_bench(runtime, **options, sink=sink, progress=progress)


_PEER_BENCH = _defaults(run_peer_bench)
PEER_BENCH = Workload(
    name="peer_bench", title="Our engine beside ONNX Runtime Web: same model, weights and prompt, alternating runs",
    kind="bench",
    options=(Option(name="peer", type="str", default=_PEER_BENCH["peer"], allowed=PEERS),
             Option(name="key", type="str", default=_PEER_BENCH["key"],
                    help="the peer build under vendor/peer/ (`webgpu-llm-lab peer build` prints it)"),
             Option(name="model", type="str", default=_PEER_BENCH["model"], allowed=MODEL_KEYS),
             Option(name="layers", type="int", default=_PEER_BENCH["layers"], minimum=1,
                    help="decoder layers (default: the model's)"),
             Option(name="prompt", type="int", default=_PEER_BENCH["prompt"], minimum=1, help="prompt tokens"),
             Option(name="decode", type="int", default=_PEER_BENCH["decode"], minimum=1, help="greedy decode steps"),
             Option(name="policy", type="str", default=_PEER_BENCH["policy"], allowed=POLICIES,
                    help="our activations of the decode linears"),
             Option(name="seed", type="int", default=_PEER_BENCH["seed"]),
             Option(name="batch", type="int", default=_PEER_BENCH["batch"], minimum=1,
                    help="our decode steps between readbacks of the generated ids"),
             Option(name="trials", type="int", default=_PEER_BENCH["trials"], minimum=1,
                    help="timed rounds per engine (medians)"),
             Option(name="flavour", type="str", default=_PEER_BENCH["flavour"], allowed=FLAVOURS,
                    help="ORT-web's wasm build"),
             Option(name="peer_device", type="str", default=_PEER_BENCH["peer_device"], allowed=PEER_DEVICES,
                    help="the peer on our GPUDevice (shared), its own without subgroups (own), or auto: ours unless "
                         "the adapter's subgroups are narrower than 8"),
             Option(name="checked", type="int", default=None, minimum=0,
                    help="decode steps whose logits the oracle judges (default: all)"),
             _ARTIFACTS_ON),
    runner=_peer_bench, renderer="peer_bench", aliases=("compare",))


async def _kernel_bench(runtime, options, sink, progress):
    return await run_kernel_bench(runtime, **options, progress=progress)


_BENCH = _defaults(run_kernel_bench)
KERNEL_BENCH = Workload(
    name="kernel_bench", title="GPU time, GB/s and GFLOP/s per kernel and shape, beside a streaming read",
    kind="bench",
    options=(Option(name="preset", type="str", default=_BENCH["preset"], allowed=(*BENCH_PRESETS, *STEP_PRESETS, *ATTENTION_BENCH_PRESETS)),
             Option(name="repeats", type="int", default=_BENCH["repeats"], minimum=1,
                    help="dispatches per measured replay"),
             Option(name="trials", type="int", default=_BENCH["trials"], minimum=1, help="replays per row (median)"),
             Option(name="chain_bytes", type="int", default=_BENCH["chain_bytes"], minimum=0,
                    help="bytes of weight copies per decode chain (0 skips the chain)"),
             Option(name="only", type="str list", default=None,
                    help="only the cases whose name (with its [shape]) contains one of these"),
             TUNING),
    runner=_kernel_bench, renderer="kernel_bench", aliases=("kernels",))


async def _host_cost(runtime, options, sink, progress):
    return await run_host_cost(runtime, **options)


_HOST = _defaults(run_host_cost)
HOST_COST = Workload(
    name="host_cost", title="Host time per dispatch: naive encoding against plan replay", kind="bench",
    options=(Option(name="dispatches", type="int", default=_HOST["dispatches"], minimum=1,
                    help="dispatches per step (a 16-layer decode: ~230)"),
             Option(name="steps", type="int", default=_HOST["steps"], minimum=1)),
    runner=_host_cost, renderer="host_cost", aliases=("host",))

_SIZE = Option(name="size", type="str", default="auto", allowed=("auto", *SIZES),
               help="auto: small on a CPU adapter, full (the real geometry) on a GPU; options given win")
_VIEW_COMMON = (
    Option(name="model", type="str", default=None, allowed=MODEL_KEYS, help="the geometry (auto: from size)"),
    Option(name="layers", type="int", default=None, minimum=1, help="decoder layers (auto: from size)"),
    Option(name="prompt", type="int", default=None, minimum=1, help="prompt tokens (auto: from size)"),
    Option(name="decode", type="int", default=None, minimum=1, help="greedy decode steps (auto: from size)"),
)
_VIEW_TAIL = (
    Option(name="seed", type="int", default=7, help="weights and prompt"),
    Option(name="batch", type="int", default=8, minimum=1, help="decode steps between readbacks of the ids"),
    Option(name="profile", type="bool", default=True, help="one profiled prefill and decode step"),
    Option(name="oracle", type="bool", default=True, help="ask the dev server's transformers oracle"),
)

GENERATE = Workload(
    name="generate",
    title="A model generating: tok/s, time to first token, routes, kernel shares, the oracle's verdict",
    kind="view",
    options=(_SIZE, *_VIEW_COMMON,
             Option(name="policy", type="str", default=None, allowed=POLICIES,
                    help="activations of the linears (auto: from size)"),
             Option(name="position", type="str", default="auto", allowed=tuple(POSITIONS),
                    help="where the sequence's position lives between decode steps (auto: the GPU where the "
                         "plan allows)"),
             Option(name="attention", type="str", default="auto", allowed=ATTENTION_CHOICES,
                    help=_ATTENTION_HELP),
             Option(name="fused", type="bool", default=True, help="the fused QKV and gate/up + SwiGLU routes"),
             Option(name="kv", type="str", default="packed", allowed=KV_SPELLINGS, help=_KV_HELP),
             TUNING, *_VIEW_TAIL),
    runner=run_generate, renderer="generate")

COMPARE = Workload(
    name="compare",
    title="Two settings of one model (policy, position, attention, fusion), alternating: tok/s, kernel deltas, "
          "routes, tokens",
    kind="view",
    options=(Option(name="size", type="str", default="auto", allowed=("auto", *COMPARE_SIZES), help=_SIZE.help),
             *_VIEW_COMMON,
             Option(name="a", type="str", default="f32", allowed=POLICIES, help="policy of side a"),
             Option(name="b", type="str", default="int8x", allowed=(*POLICIES, *PEERS),
                    help="policy of side b, or a peer engine (ort-web: ONNX Runtime Web on the same weights)"),
             Option(name="a_position", type="str", default="auto", allowed=tuple(POSITIONS),
                    help="where side a's position lives between decode steps"),
             Option(name="b_position", type="str", default="auto", allowed=tuple(POSITIONS),
                    help="where side b's position lives between decode steps"),
             Option(name="a_attention", type="str", default="auto", allowed=ATTENTION_CHOICES, help="side a's attention routes"),
             Option(name="b_attention", type="str", default="auto", allowed=ATTENTION_CHOICES, help="side b's attention routes"),
             Option(name="a_fused", type="bool", default=True, help="side a: the fused QKV and gate/up + SwiGLU"),
             Option(name="b_fused", type="bool", default=True, help="side b: the fused QKV and gate/up + SwiGLU"),
             Option(name="a_kv", type="str", default="packed", allowed=KV_SPELLINGS, help="side a's KV cache kernels"),
             Option(name="b_kv", type="str", default="packed", allowed=KV_SPELLINGS, help="side b's KV cache kernels"),
             Option(name="rounds", type="int", default=2, minimum=1, help="timed passes of each side, alternating"),
             Option(name="peer_key", type="str", default=None,
                    help="b=ort-web: the peer build under vendor/peer/ (default: the one index.json names)"),
             Option(name="peer_device", type="str", default="auto", allowed=PEER_DEVICES,
                    help="b=ort-web: our GPUDevice (shared), its own without subgroups (own), or auto"),
             Option(name="flavour", type="str", default="jspi", allowed=FLAVOURS, help="b=ort-web: ORT-web's wasm build"),
             *_VIEW_TAIL),
    runner=run_compare, renderer="compare")


CHAT = Workload(
    name="chat",
    title="A model file answering a prompt: tokenized in the page, greedy or sampled on the GPU, the text streamed "
          "with tok/s",
    kind="view",
    options=(Option(name="model_file", type="str", default="smollm2",
                    help="a GGUF file: smollm2 (vendored), picked (Load a model file), or a relative URL to a .gguf"),
             Option(name="prompt", type="str", default="What is the capital of France?", help="the prompt text"),
             Option(name="chat", type="bool", default=True, help="as one user message in the model's chat template"),
             Option(name="system", type="str", default="", help="a system message before it (chat; empty: the template's default one, if any)"),
             Option(name="steps", type="int", default=32, minimum=1, help="decode steps at most (EOS ends sooner)"),
             Option(name="policy", type="str", default="int8x", allowed=POLICIES, help="activations of the linears"),
             Option(name="batch", type="int", default=4, minimum=1, help="decode steps between readbacks of the ids"),
             *_SAMPLING,
             Option(name="seed", type="int", default=0, minimum=0, help="the sampler's seed (the same seed, the same text)")),
    runner=run_chat, renderer="chat")


async def _tokenizer(runtime, options, sink, progress):
    return await run_tokenizer_check(runtime, **options, progress=progress)


TOKENIZER = Workload(
    name="tokenizer", title="The pure-Python BPE tokenizer on the vendored vocabularies (ids judged against tokenizers)",
    kind="check",
    options=(Option(name="vocabularies", type="str list", default=VOCABULARIES, allowed=VOCABULARIES),),
    runner=_tokenizer, renderer="tokenizer")

WORKLOADS: dict[str, Workload] = {w.name: w for w in (GENERATE, COMPARE, CHAT, UNARY, RUNTIME, Q4, ELEMENTWISE,
                                                      DECODER_BLOCKS, ATTENTION, MODEL, MODEL_SOAK, TOKENIZER,
                                                      MODEL_BENCH, PEER_BENCH, KERNEL_BENCH, HOST_COST)}
DEFAULT_SUITE = UNARY.name       # the CLI's `check` default
PAGE_SUITE = GENERATE.name       # the page's default view


def get(name: str) -> Workload:
    """The workload called `name` (or one of its aliases); an unknown name lists every suite."""
    for workload in WORKLOADS.values():
        if name == workload.name or name in workload.aliases:
            return workload
    raise ValueError(f"unknown suite {name!r}; suites: {list(WORKLOADS)}")


def by_kind(kind: str) -> list[Workload]:
    return [w for w in WORKLOADS.values() if w.kind == kind]


def schemas() -> dict:
    """Every workload's declaration as plain JSON (the page's and the CLI's source for choices)."""
    return {"default_suite": DEFAULT_SUITE, "page_suite": PAGE_SUITE,
            "workloads": {name: w.to_json() for name, w in WORKLOADS.items()}}
