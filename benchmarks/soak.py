"""The soak: with no dashboard open, `sparktui supervise` keeps the engine serving on the test bed while
faults are injected at random, and every fault is measured from outside.

What runs: two test hosts (real sshd, real Ray, the stand-in engine; ``--runtime docker``: in containers on
each host's own dockerd), the engine started by ``sparktui start --wait``, and ``sparktui supervise --json``
as the only watcher. Then, for ``--minutes``, faults chosen at random (``--seed``), one at a time, each once
the engine serves again:

- ``vllm_killed``: the vLLM process SIGKILLed on the head;
- ``wedge``: the stand-in wedged (SIGUSR1: /health 200, requests stuck, tokens stop);
- ``raylet_killed``: the worker's raylet SIGKILLed;
- ``link_cut_20`` / ``link_cut_90``: the worker's link down for 20 s / 90 s;
- ``sshd_killed``: the worker's sshd killed (and its sessions), started again 20 s later as systemd would;
- ``supervisor_killed``: the supervisor SIGKILLed and started again 2 s later (it must adopt the serving
  engine, not restart it);
- ``head_reboot``: everything of ours on the head killed (vLLM, Ray, containers) and the supervisor too,
  then the supervisor started as at boot (the desired state says serving: it starts the engine);
- ``memory_squeeze``: spark2's MemAvailable below ``engine.memory_floor`` while serving, until the guard has
  stopped vLLM (each node's probe reads a copy of a recorded Spark's ``/proc``, so this machine's real
  memory is never driven down): the supervisor's out-of-memory policy, one retry, serving again;
- ``person_stop``: ``sparktui stop`` by a person — the supervisor must leave it stopped (checked for 30 s);
  then a person's ``sparktui start --wait``.

For each fault: *detected after* (the supervisor's first line after the fault), *serving again after* (a
completion answered through the head's API), the incident it kept (``sparktui incidents --json``: its files
and whether each is non-empty). At the end: faults recovered / injected, manual steps (faults not recovered
without a person, the person's stop aside), double starts (two vLLM processes on the head at once, sampled
every second), and the processes of ours left on each host after the final ``sparktui stop``.

    sudo .venv/bin/python benchmarks/soak.py [--runtime host|docker] [--minutes 20] [--seed 7] [--pace 3]
        [--faults a,b,…] [--markdown]

The figures go in docs/benchmarks.md ("Serving unattended"). Seeded and bounded in time: the same seed
injects the same faults in the same order.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures.telemetry import sparks  # noqa: E402
from tests.leftovers import processes  # noqa: E402
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs  # noqa: E402
from tests.supervise_helpers import serves  # noqa: E402
from tests.testbed import Testbed, docker_image, docker_unavailable_reason, unavailable_reason  # noqa: E402

FAULTS = ("vllm_killed", "wedge", "raylet_killed", "link_cut_20", "link_cut_90", "sshd_killed",
          "supervisor_killed", "head_reboot", "memory_squeeze", "person_stop")
#: Each node's MemAvailable in its fixture ``/proc`` (the probe reads a copy: this machine's real memory is
#: shared and never driven down), and the figure a squeeze writes on spark2: below ``engine.memory_floor``.
MEM_NORMAL = 40 * 1024**3
MEM_SQUEEZED = 2 * 1024**3
#: How long a fault may take to be served again before it counts as needing a person.
RECOVER_WITHIN = {"link_cut_90": 300.0, "head_reboot": 240.0}
RECOVER_DEFAULT = 180.0
#: How long after the fault a stop of serving is looked for: the fault's own length and the checks' delay.
WATCH_FOR = {"link_cut_20": 45.0, "link_cut_90": 120.0, "sshd_killed": 45.0, "wedge": 40.0}
STANDIN = "sparktui.sim.vllm_standin"


def env_for(config: Path) -> dict[str, str]:
    """The soak's own state directory (incidents, run history), beside its config: never the user's."""
    return {**os.environ, "XDG_STATE_HOME": str(config.parent / "state")}


def sparktui(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparktui", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env_for(config))


@dataclass
class Supervisor:
    """``sparktui supervise --json`` as a child, its lines kept with the time they arrived."""

    config: Path
    lines: list[tuple[float, str]] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    first: int = 0

    def start(self) -> None:
        #: Lines before this index are an earlier supervisor process's.
        self.first = len(self.lines)
        self.proc = subprocess.Popen([sys.executable, "-m", "sparktui", "--config", str(self.config),
                                      "supervise", "--json"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env_for(self.config))
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def says_ready(self) -> bool:
        """Its last state line is *ready* (its own readiness check passed, not only a completion from
        outside)."""
        for _, text in reversed(self.lines[self.first:]):
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if line.get("event") == "state":
                return bool(line.get("state") == "ready")
        return False

    def first_after(self, t0: float) -> float | None:
        """Seconds from ``t0`` to the supervisor's first line saying something is wrong (a state other than
        ready, a decision, an incident)."""
        for t, text in list(self.lines):
            if t <= t0:
                continue
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if line.get("event") in ("decision", "incident") or (
                    line.get("event") == "state" and line.get("state") not in ("ready", "verifying")):
                return t - t0
        return None


@dataclass
class Outcome:
    fault: str
    detected: float | None
    serving_again: float | None
    incident: str = ""
    evidence: str = ""
    note: str = ""

    @property
    def recovered(self) -> bool:
        return self.serving_again is not None


class Soak:
    def __init__(self, bed: Testbed, config: Path, api_port: int, trees: dict[str, Path]) -> None:
        self.bed = bed
        #: Each node's fixture tree (its ``proc/meminfo`` is what the probe reads).
        self.trees = trees
        self.config = config
        self.port = api_port
        self.supervisor = Supervisor(config)
        self.double_starts = 0
        self._sampling = True

    # -- what is measured from outside ------------------------------------------------------------
    def serves(self) -> bool:
        """A completion answers through the head's API."""
        return serves(self.bed, self.port)

    def wait_serving(self, within: float) -> float | None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < within:
            if self.serves():
                return time.monotonic() - t0
            time.sleep(1.0)
        return None

    def wait_supervisor_ready(self, within: float) -> bool:
        t0 = time.monotonic()
        while time.monotonic() - t0 < within:
            if self.supervisor.says_ready():
                return True
            time.sleep(0.5)
        return False

    def vllm_count(self) -> int:
        return sum(1 for line in processes(self.bed, "spark1") if f"{STANDIN} serve" in line)

    def sample_double_starts(self) -> None:
        while self._sampling:
            with contextlib.suppress(Exception):
                if self.vllm_count() > 1:
                    self.double_starts += 1
            time.sleep(1.0)

    def newest_incident(self, since_ids: set[str]) -> tuple[str, str]:
        out = sparktui(self.config, "incidents", "--json", timeout=60)
        try:
            data = json.loads(out.stdout)
        except ValueError:
            return "", f"incidents --json: exit {out.returncode}"
        items = data.get("incidents", data) if isinstance(data, dict) else data
        new = [i for i in items if str(i.get("id")) not in since_ids]
        if not new:
            return "", ""
        latest = new[-1]
        files = latest.get("files") or []
        empty = [f.get("name") for f in files if not f.get("size")]
        return str(latest.get("cause", "")), f"{len(files)} files" + (f", empty: {empty}" if empty else "")

    def incident_ids(self) -> set[str]:
        out = sparktui(self.config, "incidents", "--json", timeout=60)
        try:
            data = json.loads(out.stdout)
        except ValueError:
            return set()
        items = data.get("incidents", data) if isinstance(data, dict) else data
        return {str(i.get("id")) for i in items}

    # -- the faults --------------------------------------------------------------------------------
    def inject(self, fault: str) -> Callable[[], None] | None:
        """Inject ``fault``; returns what undoes the outside part of it (a link back up), if anything."""
        bed = self.bed
        if fault == "vllm_killed":
            bed.exec("spark1", ["pkill", "-KILL", "-f", f"{STANDIN} serve"])
        elif fault == "wedge":
            bed.exec("spark1", ["pkill", "-USR1", "-f", f"{STANDIN} serve"])
        elif fault == "raylet_killed":
            bed.exec("spark2", ["pkill", "-KILL", "-f", "raylet"])
        elif fault in ("link_cut_20", "link_cut_90"):
            bed.link_down("spark2")
            seconds = 20 if fault == "link_cut_20" else 90
            timer = threading.Timer(seconds, lambda: bed.link_up("spark2"))
            timer.start()
            return timer.join
        elif fault == "sshd_killed":
            bed.kill_sshd("spark2")
            timer = threading.Timer(20, lambda: bed.start_sshd("spark2"))
            timer.start()
            return timer.join
        elif fault == "supervisor_killed":
            self.supervisor.kill()
            time.sleep(2)
            self.supervisor.start()
        elif fault == "memory_squeeze":
            # Unified memory running out while serving: MemAvailable below the floor on spark2 until the
            # guard's stop has ended vLLM (the memory is the engine's own), then back.
            sparks.set_mem_available(self.trees["spark2"], MEM_SQUEEZED)
            squeeze = threading.Thread(target=self._release_when_stopped, daemon=True)
            squeeze.start()
            return squeeze.join
        elif fault == "head_reboot":
            self.supervisor.kill()
            for line in processes(bed, "spark1"):
                pid = line.split()[0]
                with contextlib.suppress(Exception):
                    bed.exec("spark1", ["kill", "-KILL", pid])
            if bed.with_docker:
                with contextlib.suppress(Exception):
                    bed.docker("spark1", "rm", "-f", *self._containers("spark1"))
            time.sleep(2)
            self.supervisor.start()
        else:
            raise ValueError(fault)
        return None

    def _release_when_stopped(self, within: float = 120.0) -> None:
        deadline = time.monotonic() + within
        while self.vllm_count() and time.monotonic() < deadline:
            time.sleep(0.5)
        sparks.set_mem_available(self.trees["spark2"], MEM_NORMAL)

    def _containers(self, name: str) -> list[str]:
        out = self.bed.docker(name, "ps", "-aq", "--filter", "label=sparktui.tag")
        return out.stdout.split()

    def person_stop(self) -> Outcome:
        t0 = time.monotonic()
        stop = sparktui(self.config, "stop", timeout=300)
        stayed = True
        for _ in range(30):
            if self.vllm_count():
                stayed = False
                break
            time.sleep(1.0)
        note = "stop honoured for 30 s" if stayed and stop.returncode == 0 else (
            f"stop exit {stop.returncode}" if stop.returncode else "restarted after a person's stop")
        started = sparktui(self.config, "start", "--wait", timeout=600)
        again = self.wait_serving(60) if started.returncode == 0 else None
        total = time.monotonic() - t0 if again is not None else None
        return Outcome("person_stop", self.supervisor.first_after(t0), total, note=note)

    def one(self, fault: str) -> Outcome:
        if fault == "person_stop":
            return self.person_stop()
        before = self.incident_ids()
        t0 = time.monotonic()
        undo = self.inject(fault)
        # Did serving stop? Watched for as long as the fault lasts and a while after (the supervisor's own
        # checks may stop it later: a wedge is seen after serving.wedge_seconds).
        deadline = t0 + RECOVER_WITHIN.get(fault, RECOVER_DEFAULT)
        watch_until = t0 + WATCH_FOR.get(fault, 30.0)
        stopped = False
        while time.monotonic() < watch_until:
            if not self.serves():
                stopped = True
                break
            time.sleep(1.0)
        note = ""
        if stopped:
            again = self.wait_serving(max(0.0, deadline - time.monotonic()))
            serving_again = time.monotonic() - t0 if again is not None else None
        else:
            serving_again, note = 0.0, "served throughout"
        if undo is not None:
            undo()
        cause, evidence = self.newest_incident(before)
        return Outcome(fault, self.supervisor.first_after(t0), serving_again, cause, evidence, note)

    def run(self, faults: list[str], minutes: float) -> list[Outcome]:
        threading.Thread(target=self.sample_double_starts, daemon=True).start()
        outcomes: list[Outcome] = []
        end = time.monotonic() + minutes * 60
        for fault in faults:
            if time.monotonic() > end:
                break
            if self.wait_serving(RECOVER_DEFAULT) is None or not self.wait_supervisor_ready(RECOVER_DEFAULT):
                outcomes.append(Outcome(fault, None, None, note="not serving before the fault: skipped"))
                print(f"  {fault:18} skipped: not serving before it", flush=True)
                continue
            outcome = self.one(fault)
            outcomes.append(outcome)
            print(f"  {outcome.fault:18} detected {fmt(outcome.detected)}  serving again "
                  f"{fmt(outcome.serving_again)}  {outcome.incident} {outcome.evidence} {outcome.note}",
                  flush=True)
        self._sampling = False
        return outcomes


def fixture_trees(bed: Testbed) -> tuple[dict[str, Path], dict[str, dict[str, str]]]:
    """Each host's copy of a recorded Spark's ``/proc`` and ``/sys`` (in its private /tmp), with plenty of
    memory available; the nodes' config pointing the probe at them."""
    trees: dict[str, Path] = {}
    nodes: dict[str, dict[str, str]] = {}
    for name, spark in (("spark1", "spark-a"), ("spark2", "spark-b")):
        local = bed.host_tmp(name) / "soak-fixture"
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir(parents=True)
        trees[name] = sparks.copy_spark(spark, local)
        sparks.set_mem_available(trees[name], MEM_NORMAL)
        root = f"/tmp/soak-fixture/{spark}"
        nodes[name] = {"proc_root": f"{root}/proc", "sys_root": f"{root}/sys"}
    return trees, nodes


def soak_overrides(bed: Testbed, runtime: str, pace: float) -> dict[str, Any]:
    """The test bed's config for the soak: the lifecycle tests' (fast Ray health checks, the stand-in at
    ``pace``), the docker runtime as the docker tests run it, a wedge seen after 10 s."""
    data: dict[str, Any] = lifecycle_overrides(bed, pace=pace, stop_grace=5.0)
    if runtime == "docker":
        data["engine"].update({
            "runtime": "docker", "image": docker_image.IMAGE, "vllm_command": ["vllm"],
            "ray_command": ["ray"], "ray_python": ["python3"],
            "mounts": [{"source": "/tmp/models", "target": "/tmp/models", "read_only": True}],
        })
    data["serving"] = {"wedge_seconds": 10.0}
    # A fault every minute or two for 20 minutes: the budget is sized for the soak (its own test checks it),
    # the start delay and the worker's grace short so that a recovery is measured, not a wait.
    data["supervise"] = {"max_restarts": 30, "window": 3600.0, "start_delay": 5.0, "worker_grace": 20.0}
    return data


def fmt(seconds: float | None) -> str:
    return f"{seconds:6.1f} s" if seconds is not None else "     — "


def plan(seed: int, minutes: float, only: list[str] | None) -> list[str]:
    """The faults in the order they are injected: every kind once, then at random (seeded); the person's
    stop in the middle."""
    rng = random.Random(seed)
    kinds = [f for f in (only or FAULTS) if f != "person_stop"]
    order = rng.sample(kinds, len(kinds))
    order += [rng.choice(kinds) for _ in range(int(minutes))]   # more than the time allows: cut by time
    if only is None or "person_stop" in only:
        order.insert(len(kinds) // 2, "person_stop")
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=("host", "docker"), default="host")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pace", type=float, default=3.0, help="stand-in start-up length, seconds")
    parser.add_argument("--faults", help=f"only these, comma-separated ({', '.join(FAULTS)})")
    parser.add_argument("--markdown", action="store_true", help="the table as docs/benchmarks.md has it")
    parser.add_argument("--lines", type=Path, help="write the supervisor's lines (JSON) to this file")
    args = parser.parse_args()
    reason = unavailable_reason() or (docker_unavailable_reason() if args.runtime == "docker" else None)
    if reason:
        print(f"soak: needs the test bed: {reason}", file=sys.stderr)
        return 2
    only = args.faults.split(",") if args.faults else None
    faults = plan(args.seed, args.minutes, only)
    docker = args.runtime == "docker"
    started = time.monotonic()
    with Testbed(("spark1", "spark2"), docker=docker) as bed:
        if docker:
            docker_image.install(bed, progress=True)
        make_model_dirs(bed)
        overrides = soak_overrides(bed, args.runtime, args.pace)
        trees, overrides["nodes"] = fixture_trees(bed)
        config = bed.write_config(bed.dir / "soak.toml", **overrides)
        start = sparktui(config, "start", "--wait", timeout=600)
        if start.returncode != 0:
            print(f"soak: the first start failed:\n{start.stdout}{start.stderr}", file=sys.stderr)
            return 1
        soak = Soak(bed, config, bed.spark_config(**overrides).engine.api_port, trees)
        soak.supervisor.start()
        print(f"soak: runtime {args.runtime}, seed {args.seed}, {args.minutes:g} min, stand-in pace "
              f"{args.pace:g} s", flush=True)
        try:
            outcomes = soak.run(faults, args.minutes)
        finally:
            soak.supervisor.stop()
            if args.lines:
                args.lines.write_text("".join(f"{t - started:8.1f} {text}\n"
                                              for t, text in soak.supervisor.lines))
            final = sparktui(config, "stop", timeout=300)
            left = {n: processes(bed, n) for n in bed.names}
    injected = [o for o in outcomes if "skipped" not in o.note]
    recovered = [o for o in injected if o.recovered]
    manual = [o for o in injected if not o.recovered and o.fault != "person_stop"]
    print(f"\nsoak: {len(recovered)}/{len(injected)} faults recovered, manual steps {len(manual)}, double "
          f"starts {soak.double_starts}, processes of ours left after the final stop "
          f"{sum(len(v) for v in left.values())} (stop exit {final.returncode}), "
          f"{(time.monotonic() - started) / 60:.1f} min in all")
    if args.markdown:
        print(markdown(outcomes))
    return 0 if not manual and not any(left.values()) and soak.double_starts == 0 else 1


def markdown(outcomes: list[Outcome]) -> str:
    rows = ["| fault | detected after | serving again after | incident | evidence |", "|---|---|---|---|---|"]
    for o in outcomes:
        rows.append(f"| `{o.fault}` | {fmt(o.detected).strip()} | {fmt(o.serving_again).strip()} | "
                    f"{o.incident or o.note or '—'} | {o.evidence or '—'} |")
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
