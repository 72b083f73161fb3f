"""Why this start took as long as it did, and what to change: the slow stages named against what they
should take, per node, with the fix (pure; no I/O).

Three stages take most of a start that does not download, and each has a figure that says whether it was
slow and a known remedy:

* **weights**: the read rate, the GiB a node holds (per GPU × its GPUs) over the seconds vLLM says it spent
  reading ("Loading weights took N seconds", else "Model loading took X GiB and N seconds" less the
  download). Against the disk's measured read rate (:mod:`sparktui.domain.perf.disk_read`) when known, else
  :data:`ASSUMED_DISK_GIB_S`. Far below it (under :data:`SLOW_SHARE` of it), the loader is the bottleneck,
  not the disk: on a DGX Spark the mmap path is the known trap (field notes: an 80B FP8 model in 8 min 41 s
  through mmap, 1 min 28 s with the eager strategy, kernel 6.17). Recorded Spark logs read at 0.13–0.30
  GiB/s; other machines' fast loads at 1.4–7 GiB/s. The fix names only the options the image's vLLM accepts
  (its ``serve --help``: ``--safetensors-load-strategy eager``, ``--load-format fastsafetensors``).
* **compile**: torch.compile's cache hit or miss ("Directly load the compiled graph" is a hit), and why a
  miss: the compile cache not kept on the node (engine.cache_mounts), the first start of this model here,
  another vLLM version or image (the cache key holds them).
* **CUDA graphs**: the capture's seconds against the number of batch sizes captured (the engine config's
  ``cudagraph_capture_sizes``), and the flag that bounds them.

The slowest stage is the one furthest over what it should take (seconds − expected). ``plan`` asks
:func:`expected_load_seconds` and :func:`expected_stage_seconds` for the same figures before a start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.durations import format_duration
from sparktui.domain.history import RunRecord

#: A disk read rate to expect when none was measured (GiB/s): the low end of what the Spark's NVMe gives
#: (field notes: 1–6 GiB/s; "0.65–1.4 GB/s" under a KV offload's load), so that only a loader far slower
#: than any disk is named.
ASSUMED_DISK_GIB_S = 1.0
#: A read below this share of the disk's rate is the loader's fault, not the disk's.
SLOW_SHARE = 0.5
#: A load shorter than this is never worth a fix, whatever its rate (small models, warm page cache).
MIN_SLOW_LOAD_S = 30.0
#: What torch.compile should take: from its cache, and a real compile (recorded logs: hits 4–16 s, misses
#: 14–68 s).
COMPILE_HIT_S = 20.0
COMPILE_MISS_S = 60.0
#: What one captured batch size should cost (recorded logs: 0.2–0.5 s per size; Ray V0 up to 1 s), and a
#: capture shorter than this is never worth bounding.
CAPTURE_S_PER_SIZE = 0.5
MIN_SLOW_CAPTURE_S = 30.0
#: The container path of vLLM's compile cache (``~/.cache/vllm/torch_compile_cache``).
COMPILE_CACHE_TARGET = "/root/.cache/vllm"
#: ``--load-format`` values that read without mmap (vLLM's LoadConfig help; field notes finding 6).
FAST_FORMATS = ("fastsafetensors", "instanttensor")
#: A stage as the one-line summary names it.
STAGE_WORDS = {"weights": "weights", "compile": "torch.compile", "cuda_graphs": "CUDA graphs"}
#: The field notes' evidence for the fast load path (finding 6).
MMAP_TRAP = ("mmap is the DGX Spark's load-time trap: an 80B FP8 model loaded in 8 min 41 s through mmap, "
             "1 min 28 s with the eager strategy (NVIDIA forum, kernel 6.17)")


@dataclass(frozen=True)
class LoadOptions:
    """What the image's vLLM accepts for a faster load and a bounded capture (from its ``serve --help``)."""

    #: ``--safetensors-load-strategy`` exists (and so its ``eager`` value).
    eager_strategy: bool = False
    #: The fast loaders ``--load-format``'s help lists, of those known to bypass mmap ("fastsafetensors",
    #: "instanttensor"); each needs its package in the image.
    fast_formats: tuple[str, ...] = ()
    #: The flag that bounds the captured sizes: ``--max-cudagraph-capture-size`` (0.11+) or
    #: ``--cuda-graph-sizes`` (0.9–0.10); None when neither is accepted.
    capture_flag: str | None = None

    @classmethod
    def from_help(cls, help: Any) -> LoadOptions:
        """From a :class:`~sparktui.domain.upgrade.serve_help.ServeHelp` (``accepts``, ``option``)."""
        bounds = ("--max-cudagraph-capture-size", "--cuda-graph-sizes")
        load_format = help.option("--load-format")
        text = load_format.text if load_format is not None else ""
        return cls(eager_strategy=bool(help.accepts("--safetensors-load-strategy")),
                   fast_formats=tuple(f for f in FAST_FORMATS if f'"{f}"' in text or f"{f} " in text),
                   capture_flag=next((f for f in bounds if help.accepts(f)), None))

    def fast_load_args(self) -> list[str]:
        """The options to name, best first (the eager strategy needs no extra package in the image)."""
        out = ["--safetensors-load-strategy eager"] if self.eager_strategy else []
        return out + [f"--load-format {f}" for f in self.fast_formats]


@dataclass(frozen=True)
class StageFinding:
    """One stage on one node (None: the cluster's slowest figure), its seconds against what it should take."""

    stage: str
    seconds: float
    expected: float
    #: What was seen, with its figures ("weights read at 0.30 GiB/s (64.7 GiB in 3m36s) where ...").
    what: str
    #: What to change, as an action ("--safetensors-load-strategy eager"); None when nothing should (or
    #: nothing known helps).
    fix: str | None = None
    node: str | None = None
    slow: bool = False
    figures: Mapping[str, Any] = field(default_factory=dict)
    #: Why the fix helps, with its evidence (shown after the fix where there is room).
    because: str = ""
    #: The fix in a few words, for one-line summaries (default: the fix's first option).
    brief: str = ""

    @property
    def excess(self) -> float:
        return self.seconds - self.expected

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "node": self.node, "seconds": round(self.seconds, 2),
                "expected_seconds": round(self.expected, 2), "slow": self.slow, "what": self.what,
                "fix": self.fix, "because": self.because or None, "figures": dict(self.figures)}


@dataclass(frozen=True)
class StartExplanation:
    findings: tuple[StageFinding, ...] = ()

    @property
    def slowest(self) -> StageFinding | None:
        """The slow finding furthest over what it should take (None: nothing was slow)."""
        slow = [f for f in self.findings if f.slow]
        return max(slow, key=lambda f: f.excess) if slow else None

    def short(self) -> str:
        """One line for the start's summary and the dashboard, ``""`` when nothing was slow:
        ``slow: weights 3m36s at 0.30 GiB/s (~1m05s) → --safetensors-load-strategy eager``."""
        f = self.slowest
        if f is None:
            return ""
        where = f" on {f.node}" if f.node and f.node != "head" else ""
        rate = f.figures.get("read_gib_s")
        why = f" at {rate:.2f} GiB/s" if isinstance(rate, float) else ""
        if f.stage == "compile" and f.figures.get("cache") == "miss":
            why = " (cache miss)"
        line = f"slow: {STAGE_WORDS.get(f.stage, f.stage)}{where} {format_duration(f.seconds)}{why}"
        line += f" (~{format_duration(f.expected)})"
        if f.fix:
            line += f" → {f.brief or f.fix.split(' or ')[0]}"
        return line

    def lines(self) -> list[str]:
        """The findings for ``sparktui timeline``: the slow ones first, each with its fix."""
        out: list[str] = []
        for f in sorted(self.findings, key=lambda f: (not f.slow, -f.excess)):
            where = f"[{f.node}] " if f.node else ""
            mark = "SLOW " if f.slow else "note " if f.fix else "ok   "
            out.append(f"  {mark}{where}{f.what}")
            if f.fix:
                out.append(f"       fix: {f.fix}")
            if f.because:
                out.append(f"       why: {f.because}")
        return out

    def to_json(self) -> dict[str, Any]:
        slowest = self.slowest
        return {"slowest": None if slowest is None else slowest.to_json(),
                "findings": [f.to_json() for f in self.findings]}


# ---- expectations (also for ``plan``) ---------------------------------------------------------------
def expected_load_seconds(gib_per_node: float, disk_gib_s: float | None = None) -> float:
    """What reading ``gib_per_node`` should take at the disk's measured rate (else the assumed one)."""
    rate = disk_gib_s if disk_gib_s and disk_gib_s > 0 else ASSUMED_DISK_GIB_S
    return gib_per_node / rate


def expected_stage_seconds(stage: str, *, gib_per_node: float | None = None, disk_gib_s: float | None = None,
                           compile_cache_hit: bool | None = None, capture_sizes: int | None = None
                           ) -> float | None:
    """What ``stage`` should take given what is known before (or after) a start; None when nothing is."""
    if stage == "weights":
        return None if gib_per_node is None else expected_load_seconds(gib_per_node, disk_gib_s)
    if stage == "compile":
        return COMPILE_HIT_S if compile_cache_hit else COMPILE_MISS_S
    if stage == "cuda_graphs":
        return None if capture_sizes is None else max(5.0, capture_sizes * CAPTURE_S_PER_SIZE)
    return None


# ---- the explanation --------------------------------------------------------------------------------
def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def load_seconds(facts: Mapping[str, object]) -> float | None:
    """Seconds spent reading the weights, download excluded: vLLM's "Loading weights took" (0.8.5+), else
    "Model loading took … N seconds" less "Time spent downloading weights"."""
    took = _num(facts.get("weights_load_seconds"))
    if took is not None:
        return took
    total = _num(facts.get("weights_seconds"))
    if total is None:
        return None
    return max(0.0, total - (_num(facts.get("download_seconds")) or 0.0))


def gpus_per_node(facts: Mapping[str, object], nodes: int) -> int:
    """The GPUs each node loads weights for: the world size (else TP × PP) over the nodes."""
    world = _num(facts.get("world_size"))
    if world is None:
        tp, pp = _num(facts.get("tensor_parallel_size")), _num(facts.get("pipeline_parallel_size"))
        world = (tp or 1) * (pp or 1)
    return max(1, round(world / max(1, nodes)))


@dataclass(frozen=True)
class StartContext:
    """What the log does not say: the disks, the image's options, the compile cache, the earlier starts."""

    #: Node (as the log names it: "head" or Ray's ip) -> its disk's measured read rate, GiB/s.
    disk_gib_s: Mapping[str, float] = field(default_factory=dict)
    options: LoadOptions | None = None
    #: Whether vLLM's compile cache is kept on the node (engine.cache_mounts has /root/.cache/vllm); None
    #: when not known (a log alone).
    cache_mounted: bool | None = None
    #: Earlier starts of this model on this cluster, oldest first (the run history), this one excluded.
    earlier: Sequence[RunRecord] = ()
    image: str | None = None


def explain_start(facts: Mapping[str, object], node_facts: Mapping[str, Mapping[str, object]] | None = None,
                  context: StartContext | None = None) -> StartExplanation:
    """The findings for a start's facts (the timeline's) and, where it names several nodes, each node's."""
    ctx = context or StartContext()
    per_node = dict(node_facts or {})
    findings: list[StageFinding] = []
    loaders = {n: f for n, f in per_node.items()
               if load_seconds(f) is not None and _num(f.get("weights_gib"))}
    nodes = max(1, len(per_node), int(_num(facts.get("nodes_seen")) or 1))
    gpus = gpus_per_node(facts, nodes)
    if len(loaders) > 1:
        for node, nf in loaders.items():
            found = _weights(nf, gpus, ctx, node)
            if found is not None:
                findings.append(found)
    else:
        only = next(iter(loaders), None)
        found = _weights(facts, gpus, ctx, only if len(per_node) > 1 else None, disk_node=only or "head")
        if found is not None:
            findings.append(found)
    compile_found = _compile(facts, ctx)
    if compile_found is not None:
        findings.append(compile_found)
    capture = _capture(facts, ctx.options)
    if capture is not None:
        findings.append(capture)
    return StartExplanation(tuple(findings))


def explain_snapshot(snap: Any, context: StartContext | None = None) -> StartExplanation:
    """:func:`explain_start` for a :class:`~sparktui.domain.logs.stages.TimelineSnapshot`."""
    return explain_start(snap.facts, getattr(snap, "node_facts", None), context)


def _weights(facts: Mapping[str, object], gpus: int, ctx: StartContext, node: str | None,
             disk_node: str | None = None) -> StageFinding | None:
    seconds = load_seconds(facts)
    gib_gpu = _num(facts.get("weights_gib"))
    if seconds is None or gib_gpu is None or seconds <= 0:
        return None
    gib = gib_gpu * gpus
    rate = gib / seconds
    disk = ctx.disk_gib_s.get(disk_node or node or "head")
    reference = disk if disk else ASSUMED_DISK_GIB_S
    expected = gib / reference
    slow = seconds >= MIN_SLOW_LOAD_S and rate < SLOW_SHARE * reference
    held = f"{gib:.1f} GiB" + (f" ({gpus} GPUs × {gib_gpu:.1f})" if gpus > 1 else "")
    against = (f"the disk gives {disk:.2f} GiB/s (measured)" if disk
               else f"a disk gives {ASSUMED_DISK_GIB_S:.1f} GiB/s or more (not measured here)")
    what = f"weights read at {rate:.2f} GiB/s: {held} in {format_duration(seconds)}"
    if slow:
        what += f", where {against}"
    fix, because = _load_fix(facts, ctx.options) if slow else (None, "")
    figures = {"read_gib_s": round(rate, 3), "gib": round(gib, 2), "disk_gib_s": disk,
               "load_format": facts.get("load_format")}
    # Not knowing what the image accepts, the one line names the remedy, not a flag it may reject.
    brief = "eager or fastsafetensors load" if slow and ctx.options is None and fix and fix.startswith("--") \
        else ""
    return StageFinding("weights", seconds, expected, what, fix, node, slow, figures, because, brief)


def _load_fix(facts: Mapping[str, object], options: LoadOptions | None) -> tuple[str | None, str]:
    """The option(s) to name for a slow read, and why (only what this vLLM accepts, its help known)."""
    used = str(facts.get("load_format") or "").lower().rsplit(".", 1)[-1]   # "LoadFormat.AUTO" (0.8)
    if used in FAST_FORMATS or "eager" in str(facts.get("safetensors_load_strategy") or ""):
        return ("measure the disk: sparktui model --read-test",
                f"the load already bypasses mmap ({used or 'eager'}): the disk itself is slow")
    if options is None:
        return ("--safetensors-load-strategy eager or --load-format fastsafetensors",
                f"{MMAP_TRAP}; which of them this vLLM accepts is not known here (its serve --help)")
    args = options.fast_load_args()
    if not args:
        return (None, f"{MMAP_TRAP}; this vLLM has neither --safetensors-load-strategy nor a fast "
                      "--load-format (fastsafetensors, instanttensor): a newer image has them")
    return " or ".join(args), f"{MMAP_TRAP}; this vLLM accepts {', '.join(args)}"


def _compile(facts: Mapping[str, object], ctx: StartContext) -> StageFinding | None:
    seconds = _num(facts.get("compile_seconds"))
    if seconds is None:
        return None
    hit = bool(facts.get("compile_cache_hit"))
    expected = COMPILE_HIT_S if hit else COMPILE_MISS_S
    if hit:
        return StageFinding("compile", seconds, expected,
                            f"torch.compile {format_duration(seconds)}: cache hit", None,
                            slow=seconds > 2 * expected, figures={"cache": "hit"})
    why = miss_reason(facts, ctx)
    what = f"torch.compile {format_duration(seconds)}: cache miss ({why})"
    fix = because = None
    if ctx.cache_mounted is False:
        fix = f"mount the node's ~/.cache/vllm at {COMPILE_CACHE_TARGET} (engine.cache_mounts)"
        because = "the compile cache then outlives the container: the next start loads its graphs"
    # A miss is expected once per model and version; it is only slow when it is far over a real compile.
    slow = seconds > expected or (ctx.cache_mounted is False and seconds >= COMPILE_HIT_S)
    return StageFinding("compile", seconds, COMPILE_HIT_S if slow else expected, what, fix, slow=slow,
                        figures={"cache": "miss", "why": why}, because=because or "",
                        brief="keep the compile cache (engine.cache_mounts)" if fix else "")


def miss_reason(facts: Mapping[str, object], ctx: StartContext) -> str:
    """Why torch.compile found nothing in its cache, from what is known (most certain first)."""
    if ctx.cache_mounted is False:
        return f"the cache ({COMPILE_CACHE_TARGET}) is not kept on the node: every container starts cold"
    ready = [r for r in ctx.earlier if r.outcome in ("ready", "stopped") or r.ready_seconds is not None]
    if not ready:
        return "the first start of this model here" if ctx.earlier or ctx.cache_mounted else \
            "a first start, a new vLLM or changed settings: the log alone cannot tell which"
    last = ready[-1]
    version = str(facts.get("vllm_release") or "")
    if last.vllm_version and version and not last.vllm_version.startswith(version):
        return f"vLLM changed since the last start ({last.vllm_version} → {version}): the cache key holds it"
    if ctx.image and last.image and last.image != ctx.image:
        return f"the image changed since the last start ({last.image} → {ctx.image})"
    return "the settings changed since the last start (flags, config or the model's files: the cache key)"


def _capture(facts: Mapping[str, object], options: LoadOptions | None) -> StageFinding | None:
    seconds = _num(facts.get("cuda_graphs_seconds"))
    if seconds is None:
        return None
    sizes = _num(facts.get("cuda_graphs_sizes"))
    largest = _num(facts.get("cuda_graphs_max_size"))
    if not sizes:
        what = f"CUDA graphs captured in {format_duration(seconds)}"
        return StageFinding("cuda_graphs", seconds, seconds, what)
    expected = max(5.0, sizes * CAPTURE_S_PER_SIZE)
    each = seconds / sizes
    bound = f" (up to batch {largest:.0f})" if largest else ""
    what = f"CUDA graphs: {format_duration(seconds)} for {sizes:.0f} sizes{bound}, {each:.2f} s each"
    # Within 1.5× of the usual cost per size it is the sizes' number, not the capture, that costs.
    slow = seconds >= MIN_SLOW_CAPTURE_S and seconds > 1.5 * expected
    fix = None
    because = ""
    if seconds >= MIN_SLOW_CAPTURE_S and sizes > 16:
        smaller = max(1, int((largest or 512) // 4))
        flag = options.capture_flag if options is not None else "--max-cudagraph-capture-size"
        if flag is not None:
            fix = f"{flag} {smaller}"
            because = (f"each captured size costs ~{each:.1f} s (and graph memory); batches above {smaller} "
                       "then run without a graph")
            if options is None:
                because += (" (where this vLLM has the flag; older ones bound the sizes with "
                            "--cuda-graph-sizes or --max-num-seqs)")
        elif slow:
            because = ("this vLLM's --help has neither --max-cudagraph-capture-size nor --cuda-graph-sizes: "
                       "no flag of its own bounds the sizes")
    return StageFinding("cuda_graphs", seconds, expected, what, fix, slow=slow,
                        figures={"sizes": int(sizes), "max_size": largest,
                                 "seconds_per_size": round(each, 3)}, because=because)
