"""Plans: dispatches recorded once by Python and replayed per step in one call.

Phases, in order:
  build   `await plan.add(call)` per op: pipeline (cached), a params slot, a bind group (cached)
  record  `plan.record()`: the device keeps the (pipeline, bind group) list and the workgroup
          counts where encoding happens (JS in the browser); the plan keeps its array of 3N counts
  replay  `await plan.replay(wait=False)` per token: one call to the device's step function with
          two ints (the params arena's dirty range), which uploads it, encodes every dispatch and
          submits; `plan.replay()` does the same inside error scopes and waits. `plan.resize(seq=1)`
          between steps recomputes only what follows the live sizes (workgroup counts, pushed to
          the device when they change, and params) through each op's sizing function, so
          immutable controls an op packs into its params (has_bias, nibble order) are kept. Only
          the dispatches whose sizing read a live size that changed are sized again (a decode
          step moving `pos` re-sizes RoPE, the KV cache write and attention, not the linears).
          A dispatch that does not run at the live token count (a decode-only one in a prefill) idles
          without being sized, each dispatch remembers its last few sizings by the live sizes they
          read, and the plan its last few whole states by all the live sizes: a prefill of a length
          seen before, and the first decode step after any prefill, cost a few list and array copies.
          Ops added `like=` an earlier op (a decoder's layers) share its sizing and its params slot:
          a new length sizes one layer, not every layer (a sizing costs tens of microseconds in Pyodide).
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field, replace
from typing import Mapping

from .dispatch import IDLE, MAX_PER_DIM_KEY, TOKENS, Op, OpCall, Sizing, runs_at
from .gpu.device import Dispatch, Handle
from .kernels import Kernel
from .params import ParamSlot
from .profiling import dispatch_durations, looks_quantized
from .routes import attention_conflicts, route_mask

__all__ = ["Plan", "Execution", "ProfileRow", "PlanError"]


class PlanError(RuntimeError):
    pass


@dataclass(frozen=True)
class ProfileRow:
    label: str
    kernel: str
    route: str
    workgroups: tuple[int, int, int]
    bytes_moved: int
    flops: int
    ns: int

    @property
    def gbps(self) -> float | None:
        return self.bytes_moved / self.ns if self.ns else None

    @property
    def gflops(self) -> float | None:
        return self.flops / self.ns if self.ns else None

    def to_json(self) -> dict:
        return {"label": self.label, "kernel": self.kernel, "route": self.route, "workgroups": list(self.workgroups),
                "bytes": self.bytes_moved, "flops": self.flops, "ns": self.ns, "gbps": self.gbps,
                "gflops": self.gflops}


@dataclass(frozen=True)
class Execution:
    routes: tuple[str, ...]             # routes that ran, in first-run order
    route_mask: int
    attention_conflicts: int
    host_ns: int                        # host time of the replay call, GPU wait included
    rows: tuple[ProfileRow, ...] = ()   # per dispatch, when profiled
    quantized: bool | None = None
    span_ns: int | None = None          # the whole plan in one pass, when profiled with profile="span"


@dataclass
class _Entry:
    call: OpCall
    spec: Kernel
    pipeline: Handle
    bind_group: Handle
    slot: ParamSlot | None              # a follower's is its leader's (not its own to release)
    leader: int | None = None           # the entry this one sizes as (added like= it); None: sized itself
    memo: dict = field(default_factory=dict)    # {(read names, sorted): {their values: (Sizing, reads)}}


@dataclass(frozen=True)
class _State:
    """The plan at one set of live sizes: each dispatch's sizing and reads, the workgroup counts, each
    params slot's bytes (leaders' and lone dispatches'), and the attestation."""
    sizings: list
    reads: list
    workgroups: array
    params: tuple
    attested: Execution


_MEMO_PER_READS = 16        # sizings remembered per dispatch (prompt lengths, positions), oldest dropped first
_STATES = 8                 # whole-plan states remembered (prefill lengths, the decode), oldest dropped first
_ABSENT = object()          # a live size a sizing asked about and did not find
_IDLE_READS = frozenset({TOKENS})


class _Reads(dict):
    """The live sizes as one sizing function sees them, noting the ones it reads. Sizing functions are
    pure, so one whose reads did not change would return the same Sizing."""

    def __init__(self, live: Mapping[str, int]):
        super().__init__(live)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def _sized(call: OpCall, spec: Kernel, live: Mapping[str, int]) -> tuple[Sizing, frozenset]:
    reads = _Reads(live)
    return call.sizing(spec, reads), frozenset(reads.read)


def _resized(entry: _Entry, current: Sizing, live: Mapping[str, int]) -> tuple[Sizing, frozenset]:
    """`_sized` at new live sizes, without calling the sizing where its answer is known: IDLE where the
    dispatch does not run at the live token count (its params are kept: nothing reads them), else a
    remembered sizing whose read sizes all have the values they have now (sizing functions are pure)."""
    tokens = live.get(TOKENS)
    if tokens is not None and not entry.call.runs_with(tokens):
        return Sizing(workgroups=IDLE, params=current.params), _IDLE_READS
    for names, known in entry.memo.items():
        hit = known.get(tuple(live.get(name, _ABSENT) for name in names))
        if hit is not None:
            return hit
    sizing, reads = _sized(entry.call, entry.spec, live)
    _remember(entry, live, sizing, reads)
    return sizing, reads


def _remember(entry: _Entry, live: Mapping[str, int], sizing: Sizing, reads: frozenset) -> None:
    names = tuple(sorted(reads))
    known = entry.memo.setdefault(names, {})
    if len(known) >= _MEMO_PER_READS:
        del known[next(iter(known))]
    known[tuple(live.get(name, _ABSENT) for name in names)] = (sizing, reads)


def _counts(sizings: list[Sizing]) -> array:
    return array("I", [count for sizing in sizings for count in sizing.workgroups])


class Plan:
    def __init__(self, runtime, label: str, live: Mapping[str, int] | None = None):
        self.runtime = runtime
        self.label = label
        self.live = {MAX_PER_DIM_KEY: runtime.max_workgroups_per_dim, **(live or {})}
        self._calls: list[tuple[OpCall, object]] = []      # each with the key it was added like (or None)
        self._entries: list[_Entry] = []
        self._sizings: list[Sizing] = []        # per dispatch, at the current live sizes
        self._reads: list[frozenset] = []       # the live sizes each sizing read
        self._leaders: dict = {}                # like= key -> the first entry index of the op added with it
        self._states: dict = {}                 # tuple(sorted live items) -> _State
        self._recorded: Handle | None = None
        self._step = None           # the device's step function while recorded (the per-token path)
        self.workgroups = array("I")

    def __len__(self) -> int:
        return len(self._entries)

    async def add(self, op: Op | OpCall, *, like=None) -> None:
        """Add an op's dispatches (every builder returns an Op; a lone OpCall is accepted too). `like`:
        a key naming ops that size alike at every live size (the same op in each decoder layer, on other
        tensors); the first op added with a key is sized, later ones follow it and bind its params slot.
        A follower must match it in kernels, phases and sizing at the current sizes (else PlanError)."""
        if self._recorded is not None:
            raise PlanError(f"plan {self.label!r} is recorded; add ops before record()")
        calls = op.calls if isinstance(op, Op) else (op,)
        leader = None if like is None else self._leaders.get(like)
        if like is not None and leader is None:
            self._leaders[like] = len(self._entries)
        elif leader is not None and (leader + len(calls) > len(self._entries)
                                     or any(self._entries[leader + n].call.kernel != call.kernel
                                            or self._entries[leader + n].call.phase != call.phase
                                            for n, call in enumerate(calls))):
            raise PlanError(f"{calls[0].label}: added like {like!r}, but its dispatches are not that op's kernels "
                            f"and phases")
        for n, call in enumerate(calls):
            route_mask((call.route, *call.attests))     # unknown routes fail at build time, not at attestation
            await self._build(call, None if leader is None else leader + n)
            self._calls.append((call, None if like is None else (like, n)))

    async def _build(self, call: OpCall, leader: int | None) -> None:
        runtime = self.runtime
        spec, pipeline = await runtime.pipelines.get(call.kernel, dict(call.constants) if call.constants else None)
        sizing, reads = _sized(call, spec, self.live)
        if leader is not None and (sizing, reads) != (self._sizings[leader], self._reads[leader]):
            raise PlanError(f"{call.label}: added like {self._entries[leader].call.label}, but it sizes otherwise "
                            f"({sizing} against {self._sizings[leader]})")
        uniforms = [b["binding"] for b in spec.bindings if b["space"] == "uniform"]
        storage = {b["name"]: b["binding"] for b in spec.bindings if b["space"] == "storage"}
        if set(call.tensors) != set(storage):
            raise PlanError(f"{call.label}: kernel {call.kernel} binds storage {sorted(storage)}, "
                            f"the op gave {sorted(call.tensors)}")
        buffers = {storage[name]: tensor.buffer for name, tensor in call.tensors.items()}
        slot = None
        if uniforms:
            if leader is not None:
                slot = self._entries[leader].slot
            else:
                slot = runtime.params.slot(len(sizing.params))
                runtime.params.write(slot, sizing.params)
            buffers[uniforms[0]] = await runtime.params.binding(slot)
        bind_group = await runtime.bind_groups.get(label=call.label, pipeline=pipeline, buffers=buffers)
        entry = _Entry(call, spec, pipeline, bind_group, slot, leader)
        if leader is None:
            _remember(entry, self.live, sizing, reads)
        self._entries.append(entry)
        self._sizings.append(sizing)
        self._reads.append(reads)

    def record(self) -> None:
        if not self._entries:
            raise PlanError(f"plan {self.label!r} has no dispatches")
        # The device and arena of this recording: after Runtime.rebuild the plan must rebuild too.
        self._device, self._arena = self.runtime.device, self.runtime.params
        self._recorded = self._device.record(self.dispatches(), label=self.label)
        self._step = self._device.stepper(self._recorded)
        self.workgroups = _counts(self._sizings)
        self._attested = self._attestation(self._sizings)
        self._states[tuple(sorted(self.live.items()))] = _State(
            list(self._sizings), list(self._reads), array("I", self.workgroups), self._slot_params(self._sizings),
            self._attested)

    def dispatches(self) -> list[Dispatch]:
        """The plan as plain dispatches at the current sizes (for naive encoding and debugging)."""
        return [Dispatch(label=e.call.label, pipeline=e.pipeline, bind_group=e.bind_group,
                         workgroups=sizing.workgroups) for e, sizing in zip(self._entries, self._sizings)]

    def resize(self, **live: int) -> None:
        """New live sizes (e.g. seq=1 after a prefill): recompute counts and params only."""
        unknown = sorted(set(live) - set(self.live))
        if unknown:
            raise PlanError(f"plan {self.label!r} has no live size(s) {unknown}; it has {sorted(self.live)}")
        changed = {key for key, value in live.items() if self.live[key] != value}
        if not changed:
            return
        new_live = {**self.live, **live}
        key = tuple(sorted(new_live.items()))
        state = self._states.pop(key, None)
        if state is None:
            state = self._sized_state(new_live, changed)    # a rejected size raises here: nothing changed yet
        self._states[key] = state                           # (now the newest)
        if len(self._states) > _STATES:
            del self._states[next(iter(self._states))]
        self._enter(new_live, state)

    def _sized_state(self, live: dict, changed: set) -> _State:
        """The plan at new live sizes: the dispatches whose sizing read a changed size sized again (a
        follower takes its leader's, sized just before it), the others as they are."""
        sizings, reads, entries = list(self._sizings), list(self._reads), self._entries
        counts = array("I", self.workgroups) if self._recorded is not None else None
        for index, read in enumerate(self._reads):
            if not read & changed:
                continue
            entry = entries[index]
            if entry.leader is not None:
                sizing, read = sizings[entry.leader], reads[entry.leader]
            else:
                sizing, read = _resized(entry, sizings[index], live)
                if entry.slot is not None and len(sizing.params) != len(sizings[index].params):
                    raise PlanError(f"{entry.call.label}: params changed size on resize")
            sizings[index], reads[index] = sizing, read
            if counts is not None:
                counts[3 * index:3 * index + 3] = array("I", sizing.workgroups)
        return _State(sizings, reads, counts if counts is not None else _counts(sizings), self._slot_params(sizings),
                      self._attestation(sizings))

    def _slot_params(self, sizings: list[Sizing]) -> tuple:
        """Each params slot's bytes at these sizings (a follower's slot is its leader's)."""
        return tuple((entry.slot, sizing.params) for entry, sizing in zip(self._entries, sizings)
                     if entry.slot is not None and entry.leader is None)

    def _enter(self, live: dict, state: _State) -> None:
        write = self.runtime.params.write
        for slot, params in state.params:       # (unchanged bytes cost a compare)
            write(slot, params)
        self.live = live
        self._sizings, self._reads = list(state.sizings), list(state.reads)
        self._attested = state.attested
        if self._recorded is None:
            self.workgroups = array("I", state.workgroups)
        elif self.workgroups != state.workgroups:
            self.workgroups[:] = state.workgroups       # in place: views of it stay
            self._device.set_workgroups(self._recorded, self.workgroups)

    def params_of(self, index: int) -> bytes:
        """The params bytes dispatch `index` will see (for tests and debugging)."""
        entry = self._entries[index]
        return self.runtime.params.read(entry.slot)[:len(self._sizings[index].params)] if entry.slot else b""

    @property
    def routes(self) -> tuple[str, ...]:
        """Routes of the dispatches that run at the current sizes (idle alternatives excluded)."""
        return self._attestation(self._sizings).routes

    @property
    def active_dispatches(self) -> int:
        """How many dispatches run at the current sizes (idle alternatives excluded)."""
        return sum(1 for sizing in self._sizings if runs_at(sizing.workgroups))

    async def replay(self, *, profile: bool | str = False, wait: bool = True, repeat: int = 1) -> Execution:
        """One step. wait=False returns once the work is submitted (host cost only); profiling waits.
        repeat=N (unwaited, unprofiled): the step N times over in one submit, for a plan whose
        repeated steps read what the previous one left on the GPU (a decode with its position there)."""
        step = self._step
        if step is None:
            raise PlanError(f"plan {self.label!r} is not recorded; call record() after the last add()")
        if repeat != 1:
            if not isinstance(repeat, int) or repeat < 1:
                raise PlanError(f"repeat must be a positive int, not {repeat!r}")
            if wait or profile:
                raise PlanError("a repeated step is submitted unwaited and unprofiled (wait=False, profile=False)")
        if wait or profile:
            return await self._replay_waited(profile)
        # The per-token path: one device call; nothing here allocates beyond the Execution.
        arena = self._arena
        lo, hi = arena.take_range()
        started = time.perf_counter_ns()
        try:
            if repeat == 1:
                step(lo, hi)
            else:
                step(lo, hi, repeat)
        except BaseException:
            arena.mark_dirty(lo, hi)        # the upload may not have happened: the next step retries it
            raise
        host_ns = time.perf_counter_ns() - started
        attested = self._attested
        return Execution(attested.routes, attested.route_mask, attested.attention_conflicts, host_ns)

    async def _replay_waited(self, profile: bool | str) -> Execution:
        """profile=True: one pass per dispatch, a ProfileRow each; profile="span": the plan's own single
        pass between two timestamps (dispatches back to back, as unprofiled), as span_ns."""
        if profile not in (False, True, "span"):
            raise PlanError(f"profile must be False, True or 'span', not {profile!r}")
        device = self._device
        if profile and "timestamp-query" not in device.adapter.device_features:
            raise PlanError("profiling needs the 'timestamp-query' feature, which this device lacks")
        arena = self._arena
        lo, hi = arena.take_range()
        started = time.perf_counter_ns()
        try:
            stamps = await device.replay(self._recorded, timestamps=profile, upload=(lo, hi))
        except BaseException:
            arena.mark_dirty(lo, hi)
            raise
        host_ns = time.perf_counter_ns() - started
        if not stamps:
            return replace(self._attested, host_ns=host_ns)
        if profile == "span":
            return replace(self._attested, host_ns=host_ns, span_ns=stamps[1] - stamps[0],
                           quantized=looks_quantized(stamps))
        rows = tuple(ProfileRow(e.call.label, e.call.kernel, e.call.route, sizing.workgroups, sizing.bytes_moved,
                                sizing.flops, ns)
                     for e, sizing, ns in zip(self._entries, self._sizings, dispatch_durations(stamps))
                     if runs_at(sizing.workgroups))
        return replace(self._attested, host_ns=host_ns, rows=rows, quantized=looks_quantized(stamps))

    def _attestation(self, sizings: list[Sizing]) -> Execution:
        """Routes only change when sizes do: the attestation is derived at record and per new state, not per step."""
        routes = tuple(dict.fromkeys(route for e, sizing in zip(self._entries, sizings) if runs_at(sizing.workgroups)
                                     for route in (e.call.route, *e.call.attests)))
        return Execution(routes=routes, route_mask=route_mask(routes), attention_conflicts=attention_conflicts(routes),
                         host_ns=0)

    async def rebuild(self) -> None:
        """Re-create every dispatch on the runtime's current device (after Runtime.rebuild)."""
        self._drop_recording()
        calls = self._calls         # (the old slots went with the old arena)
        self._calls, self._entries, self._sizings, self._reads, self._leaders, self._states = [], [], [], [], {}, {}
        for call, like in calls:
            await self.add(call, like=like)
        self.record()

    def _drop_recording(self) -> None:
        if self._recorded is not None:
            self._device.destroy(self._recorded)        # the device it was recorded on, lost or not
            self._recorded = self._step = None

    def release(self) -> None:
        """Destroy the recording and hand the params slots back to the arena."""
        self._drop_recording()
        for entry in self._entries:
            if entry.slot is not None and entry.leader is None:     # (a follower's is its leader's)
                self.runtime.params.release(entry.slot)
        self._entries, self._sizings, self._reads, self._states = [], [], [], {}
