"""Attention kernel selection: a first-match rule table (data) over plan facts and device caps, for one
sequence (`attention`) and for batches (`attention_varlen`, `attention_kvcache`): a call's family picks the
registry op whose kernels serve it, its batch size the split-K grid. The limits a rule checks (head dim,
workgroup memory, features, tile sizes) come from the registry entries and their shaders, never retyped here."""

from __future__ import annotations

import functools

import attrs

from wgraph.errors import LimitError, PlanError, RegistryError, UnsupportedError
from wgraph.ops.core import ceil_div, device_refusal
from wgraph.kernels.registry import Kernel, kernels_for, registry
from wgraph.ops.attention_chunks import head_blocks, splitk_chunks
from wgraph.ops.cpu_limits import CPU_DEVICE

PHASES = ("prefill", "decode")
DTYPES = ("f32", "f16", "f16kv")
LAYOUTS = ("contiguous", "ring", "paged")
FAMILIES = ("attention", "attention_batched")   # registry ops: one sequence, a batch of sequences
SINGLE, BATCHED, BOTH = FAMILIES[:1], FAMILIES[1:], FAMILIES


@attrs.frozen
class PlanFacts:
    """What the planner decides on. kv_span: the most keys one query can see (kv capacity when kv_len is
    read from the GPU; a batch: the longest sequence's). kv_capacity: the keys the k/v storage holds for one
    query (0: kv_span); the speed rule `max_kv_span` reads it, so moving an int kv_len within the storage (a
    Program's update) never changes a kernel between one pass and split-K. family: the registry op whose kernels
    serve the call; batch: its sequences (the split-K grid aims its workgroups at all of them; a batch of one
    plans as one sequence). seq_len: a batch's queries per sequence (its most)."""

    phase: str
    dtype: str
    seq_len: int
    num_heads: int
    head_dim: int
    kv_span: int
    layout: str = "contiguous"
    num_kv_heads: int = 0  # 0: as many as num_heads (no GQA)
    family: str = "attention"
    batch: int = 1
    kv_capacity: int = 0

    @property
    def q_per_kv(self) -> int:
        """q heads per kv head (the GQA group; 1 without GQA)."""
        return self.num_heads // (self.num_kv_heads or self.num_heads)


@attrs.frozen
class Rule:
    """Take the `tier` kernel of the call's family, phase and dtype when the facts satisfy the rule and it
    fits. min_chunks: the rule wants kv_span >= min_chunks * the kernel's chunk_size. families: the calls the
    rule serves."""

    phase: str
    tier: str
    reason: str
    min_chunks: int = 0
    families: tuple[str, ...] = SINGLE


# First match wins among the rules of the call's family. A decode call only meets decode rules, and the last
# decode rule of each family has a kernel needing no feature beyond the dtype's, so every device that can hold
# the dtype gets a decode kernel.
RULES: tuple[Rule, ...] = (
    Rule("decode", "single", "decode over few keys on a GPU with subgroups: one dispatch, one workgroup per (kv "
         "head, head block) walks every visible key as the fused kernel walks a chunk and writes the output, no "
         "combine pass", families=BOTH),
    Rule("decode", "fused", "decode on a GPU with subgroups: split-K over kv chunks, one workgroup per (chunk, kv "
         "head) serving its q heads, K and V loaded together, q.k summed by subgroup shuffles, online softmax in "
         "registers, then a combine pass", families=BOTH),
    Rule("decode", "splitk", "decode: split-K over kv chunks, one workgroup per (chunk, kv head) serving its q "
         "heads, coalesced 16-byte K/V loads, then a combine pass", families=BOTH),
    Rule("decode", "chunked", "decode over a long kv: kv split into chunks across workgroups", min_chunks=4),
    Rule("decode", "subgroup", "decode with subgroups: lanes split the head dim, one subgroupAdd per key"),
    Rule("decode", "streaming", "decode without subgroups: threads split the keys, tree reductions"),
    Rule("decode", "flash", "batched decode with a head dim split-K cannot split: the flash kernel, one query row "
         "per sequence", families=BATCHED),
    Rule("decode", "tiled", "batched decode fallback: the tiled kernel, one query row per sequence",
         families=BATCHED),
    Rule("prefill", "gemm", "prefill on a GPU with subgroups: GEMM-shaped flash kernel, S = Q K^T and P V as "
         "register-tiled GEMMs over Q/K/V tiles in workgroup memory, online softmax by a row's lanes, causal tiles "
         "skipped", families=BOTH),
    Rule("prefill", "flash", "prefill on a GPU with subgroups: flash kernel, q and output in registers, K/V "
         "tiles in workgroup memory, q.k summed across a query's lanes by subgroup shuffles, causal tiles skipped",
         families=BOTH),
    Rule("prefill", "tiled_large", "prefill with a small head dim: large query tile"),
    Rule("prefill", "tiled_small", "prefill: small query tile, head dims up to the small tile's limit"),
    Rule("prefill", "tiled", "batched prefill: K/V tiles and scores in workgroup memory, a query's threads split "
         "its head dims", families=BATCHED),
    Rule("prefill", "streaming", "prefill fallback: one workgroup per query, under 1 KB workgroup memory"),
    Rule("prefill", "chunked", "prefill over a long kv on a CPU device: keys split into chunks across workgroups, "
         "then a combine pass (every invocation stays under lavapipe's loop cap)"),
)


@attrs.frozen
class KernelPlan:
    """The chosen kernel and how it is dispatched.

    variant: the registry kernel's name. tier: its tier (what kind of kernel it is). reason: why the rule
    table chose it. workgroups: the main dispatch's grid. `dispatches`: (variant, workgroups) in order (the
    chunked decode adds its combine pass). `max_chunks`: for kernels that split the keys into chunks, the most
    chunks one query's keys may take — the uniform num_chunks and the stride of the partial buffers (the
    dispatched count is workgroups[0], which with a split-K kernel can be fewer); 0 for kernels that do not
    split. chunk_size: keys per chunk (0 without chunks). `rejected`: (variant, why) for rules tried before
    this one."""

    variant: str
    tier: str
    reason: str
    workgroups: tuple[int, int, int]
    dispatches: tuple[tuple[str, tuple[int, int, int]], ...]
    max_chunks: int = 0
    chunk_size: int = 0
    rejected: tuple[tuple[str, str], ...] = ()

    def explain(self) -> str:
        """The plan in words: the variant, its tier, why, its workgroups and the variants skipped."""
        lines = [f"{self.variant} ({self.tier}): {self.reason}; workgroups {self.workgroups}"]
        lines += [f"  skipped {v}: {why}" for v, why in self.rejected]
        return "\n".join(lines)


def attention_kernels(family: str = "attention") -> tuple[Kernel, ...]:
    return kernels_for(family)


def phases_of(k: Kernel) -> tuple[str, ...]:
    """The phases a kernel serves (registry fact `phase`: one name or a list)."""
    phase = k.facts.get("phase")
    return (phase,) if isinstance(phase, str) else tuple(phase or ())


def kernels_of(phase: str, tier: str, dtype: str, family: str = "attention") -> tuple[Kernel, ...]:
    """The kernels of one family and tier for one phase and dtype, in registry order."""
    return tuple(k for k in attention_kernels(family)
                 if phase in phases_of(k) and k.facts.get("tier") == tier and k.facts.get("dtype") == dtype)


def max_head_dim(family: str = "attention") -> int:
    """The largest head dim any kernel of the family takes."""
    return max(k.limits["max_head_dim"] for k in attention_kernels(family))


def shader_const(k: Kernel, name: str) -> int:
    """A const of kernel `k`'s shader (read once when the registry loads: planning is a dict lookup)."""
    return k.const(name)


def misfit(k: Kernel, facts: PlanFacts, caps, forced: bool = False) -> tuple[type, str] | None:
    """Why kernel `k` cannot run this call on this device (error class and message), or None."""
    if k.op != facts.family:
        return PlanError, f"is an {k.op} kernel; the call is {facts.family}"
    if facts.phase not in phases_of(k):
        return PlanError, (f"is a {'/'.join(phases_of(k))} kernel; the call is {facts.phase} (seq_len "
                           f"{facts.seq_len})")
    if k.facts.get("dtype") != facts.dtype:
        return PlanError, f"takes dtype {k.facts.get('dtype')}; the call is {facts.dtype}"
    refused = device_refusal(k, caps)
    if refused:
        return refused
    if facts.head_dim > k.limits["max_head_dim"]:
        return LimitError, f"takes head_dim <= {k.limits['max_head_dim']}; got {facts.head_dim}"
    if facts.head_dim < k.limits.get("min_head_dim", 0) and not forced:
        # a speed rule (the kernel computes any smaller head_dim right): a smaller head-dim class is faster there
        return PlanError, f"is for head_dim >= {k.limits['min_head_dim']}; got {facts.head_dim}"
    group = facts.q_per_kv
    if group > k.limits.get("max_q_per_kv", group):
        return LimitError, (f"serves at most {k.limits['max_q_per_kv']} q heads per kv head; the call has "
                            f"{group} ({facts.num_heads}/{facts.num_kv_heads})")
    multiple = int(k.facts.get("head_dim_multiple", 1))
    if facts.head_dim % multiple:
        return UnsupportedError, f"takes head_dim a multiple of {multiple} (vector loads); got {facts.head_dim}"
    if k.facts.get("subgroup_lanes"):
        lanes = facts.head_dim // int(k.limits["dims_per_lane"])
        if lanes & (lanes - 1) or not 0 < lanes <= k.threads:
            return UnsupportedError, (f"splits a key row over head_dim {facts.head_dim} / {k.limits['dims_per_lane']} "
                                      f"= {lanes} lanes: needs a power of two <= {k.threads}")
    if facts.layout not in k.facts.get("layouts", LAYOUTS):
        return UnsupportedError, f"does not read the {facts.layout} kv layout"
    if k.facts.get("gpu_only") and caps.is_cpu and not forced:
        # Not an error when forced: the kernel runs on a CPU device, it only compiles for a minute there.
        return UnsupportedError, f"is GPU-tuned (fully unrolled): {CPU_DEVICE} compiles it for tens of seconds"
    if caps.is_cpu:
        from wgraph.ops.attention_loops import cpu_misfit  # it reads kernel consts through shader_const above

        why = cpu_misfit(k, facts, caps)
        if why is not None:
            return LimitError, why
    return None


def speed_refusal(k: Kernel, facts: PlanFacts) -> str | None:
    """The speed rule (a registry fact from an A/B, not a limit: forcing still runs the kernel) that passes kernel `k`
    over for this call, as the comparison that failed, or None: min_kv_span on the keys a query sees; max_kv_span on
    the keys the storage holds (so a Program moving an int kv_len within it keeps its kernels); max_head_rows on
    the query rows of every head, seq_len x num_heads (a grid of query blocks: where it is small, a kernel of bigger
    blocks runs one wave whose heaviest causal block sets the time); min_batch on the sequences; min_q_per_kv on
    the GQA group (a workgroup serving several q heads would leave slots idle)."""
    held = facts.kv_capacity or facts.kv_span
    rules = (("min_kv_span", facts.kv_span, "kv span {} < {}"), ("max_kv_span", held, "kv capacity {} > {}"),
             ("max_head_rows", facts.seq_len * facts.num_heads, "{} query rows x heads > {}"),
             ("min_batch", facts.batch, "batch {} < {}"),
             ("min_q_per_kv", facts.q_per_kv, "{} q heads per kv head < {}"))
    for fact, value, text in rules:
        bound = k.facts.get(fact)
        if bound is not None and (value > int(bound) if fact.startswith("max") else value < int(bound)):
            return text.format(value, bound)
    return None


# The split-K consts a main kernel shares with its combine: the chunk count derives from them.
_SPLITK_SHARED = {"combine": ("CHUNK_STEP",)}


def check_splitk_companions(k: Kernel, reg) -> None:
    """A split-K kernel's combine derives the chunk count from kv_len as it does: the consts they share must
    agree, or the combine merges the wrong chunks. RegistryError naming both otherwise."""
    for role, consts in _SPLITK_SHARED.items():
        other = reg.get(k.facts.get(role, ""))
        if other is None:
            raise RegistryError(f"split-K kernel {k.name}: its {role} {k.facts.get(role)!r} is not in the registry")
        for c in consts:
            if shader_const(k, c) != shader_const(other, c):
                raise RegistryError(f"split-K kernel {k.name} has {c} {shader_const(k, c)} but its {role} "
                                    f"{other.name} has {shader_const(other, c)}")


@functools.cache
def _checked_splitk(name: str) -> None:   # once per kernel: planning runs on every immediate call
    check_splitk_companions(registry()[name], registry())


def _dispatches(k: Kernel, facts: PlanFacts):
    grid = k.facts["grid"]
    S, H, B = facts.seq_len, facts.num_heads, facts.batch
    if grid == "block":
        # heads vary fastest, so every head's heaviest query block (a causal block's keys grow with it) starts
        # before any head's next one: the last workgroups to start are the lightest (attention_prefill_gemm.wgsl)
        wg = (H, ceil_div(S, shader_const(k, "BLOCK_M")), 1)
        return wg, ((k.name, wg),), 0, 0
    if grid == "seq_blocks":
        wg = (H, B, ceil_div(S, shader_const(k, "BLOCK_M")))
        return wg, ((k.name, wg),), 0, 0
    if grid == "row":
        return (S, H, 1), ((k.name, (S, H, 1)),), 0, 0
    if grid == "chunks":
        chunk = int(k.facts["chunk_size"])
        n = max(1, ceil_div(facts.kv_span, chunk))
        wg = (n, H, S)
        return wg, ((k.name, wg), (k.facts["combine"], (1, H, S))), n, chunk
    if grid in ("single", "seq_single"):   # one workgroup per (kv head, head block), per sequence in a batch
        hkv, blocks = facts.num_kv_heads or H, head_blocks(k, facts)
        wg = (1, hkv, blocks) if grid == "single" else (1, hkv * blocks, B)
        return wg, ((k.name, wg),), 0, 0
    if grid == "splitk":
        _checked_splitk(k.name)
        n, most, blocks = splitk_chunks(k, facts)
        wg = (n, facts.num_kv_heads or H, blocks)
        return wg, ((k.name, wg), (k.facts["combine"], (1, H, 1))), most, shader_const(k, "CHUNK_STEP")
    if grid == "seq_splitk":
        # every sequence splits its own keys on the GPU (attention_splitk_split.wgsl): the grid holds the most
        # chunks a sequence can take, and a shorter sequence's surplus chunks return at once
        _checked_splitk(k.name)
        _, most, blocks = splitk_chunks(k, facts)
        wg = (most, (facts.num_kv_heads or H) * blocks, B)
        return wg, ((k.name, wg), (k.facts["combine"], (1, H, B))), most, shader_const(k, "CHUNK_STEP")
    raise PlanError(f"kernel {k.name} has unknown grid {grid!r}")


def _plan_with(k: Kernel, tier: str, reason: str, facts: PlanFacts, rejected=()) -> KernelPlan:
    wg, dispatches, n, chunk = _dispatches(k, facts)
    return KernelPlan(k.name, tier, reason, wg, dispatches, n, chunk, tuple(rejected))


def plan(facts: PlanFacts, caps, variant: str | None = None, rules: tuple[Rule, ...] = RULES) -> KernelPlan:
    """The first rule whose kernel fits, or the forced `variant` (validated, never replaced)."""
    if (facts.phase not in PHASES or facts.dtype not in DTYPES or facts.layout not in LAYOUTS
            or facts.family not in FAMILIES or facts.batch < 1):
        raise PlanError(f"bad plan facts {facts}")
    if variant is not None:
        k = registry().get(variant)
        if k is None or k.op != facts.family:
            names = sorted(x.name for x in attention_kernels(facts.family))
            raise PlanError(f"unknown {facts.family} variant {variant!r}; known: {names}")
        why = misfit(k, facts, caps, forced=True)
        if why is not None:
            cls, msg = why
            raise cls(f"forced {facts.family} variant {variant} does not fit: it {msg}")
        return _plan_with(k, k.facts["tier"], f"forced: variant={variant}", facts)
    rejected, limited = [], False   # limited: a kernel of the call's kind was rejected for a size (LimitError)
    for rule in rules:
        if rule.phase != facts.phase or facts.family not in rule.families:
            continue
        candidates = kernels_of(rule.phase, rule.tier, facts.dtype, facts.family)
        if not candidates:
            rejected.append((f"{rule.phase}/{rule.tier}/{facts.dtype}", "no such kernel in the registry"))
            continue
        for k in candidates:  # registry order: a tier's head-dim classes from the smallest up
            if rule.min_chunks and facts.kv_span < rule.min_chunks * int(k.facts["chunk_size"]):
                rejected.append((k.name, f"kv span {facts.kv_span} < {rule.min_chunks} chunks of {k.facts['chunk_size']}"))
                continue
            if k.facts.get("experimental"):  # a candidate the H200 has not confirmed yet (forcing still runs it)
                rejected.append((k.name, "experimental: not planned until an H200 A/B confirms it"))
                continue
            slower = speed_refusal(k, facts)
            if slower is not None:
                rejected.append((k.name, f"{slower}, where it is slower"))
                continue
            why = misfit(k, facts, caps)
            if why is not None:
                rejected.append((k.name, why[1]))
                limited = limited or why[0] is LimitError
                continue
            batch = f", batch {facts.batch}" if facts.family != "attention" else ""
            return _plan_with(k, rule.tier, f"{rule.reason} (head_dim {facts.head_dim}, kv span {facts.kv_span}"
                              f"{batch})", facts, rejected)
    detail = "; ".join(f"{v} {why}" for v, why in rejected)
    cls = LimitError if limited else UnsupportedError
    raise cls(f"no {facts.family} kernel for {facts.phase} {facts.dtype} head_dim {facts.head_dim} "
              f"on {caps.adapter_name!r}: {detail}")
