"""Waiting for a link: the event-based ``Transport.wait_connected`` against the 20 Hz poll it replaced.

Every reconnecting stream (log follower, probe, Ray and peer watches) waits in ``wait_connected`` while
its node is down; a dashboard over several nodes has a dozen of them. Measured in one run, on the local
transport (no SSH: the wait itself is what is measured):

1. **CPU while waiting**: ``--waiters`` tasks wait ``--seconds`` s for a link that stays down.
2. **Wake latency**: how long after the link comes up the last waiter returns (it comes up half a poll
   period after a poll: the poll's average case).

The naive way, in the same run: the loop ``wait_connected`` had (check the phase, ``sleep(0.05)``).

    .venv/bin/python benchmarks/bench_wait_connected.py [--waiters 12] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.remote.transport import LinkPhase, LocalTransport, Transport  # noqa: E402


async def polled(transport: Transport) -> None:
    """The loop before: look at the phase 20 times a second."""
    while transport.state.phase is not LinkPhase.CONNECTED:
        await asyncio.sleep(0.05)


async def evented(transport: Transport) -> None:
    await transport.wait_connected()


async def measure(wait: Callable[[Transport], Coroutine[Any, Any, None]], waiters: int,
                  seconds: float) -> tuple[float, float]:
    """(CPU seconds spent while the link was down, seconds from link up to the last waiter's return)."""
    transport = LocalTransport("bench")
    tasks = [asyncio.create_task(wait(transport)) for _ in range(waiters)]
    await asyncio.sleep(0)
    cpu0 = time.process_time()
    # Half a poll period off the pollers' ticks: the link comes up between two of their looks.
    await asyncio.sleep(seconds + 0.025)
    cpu = time.process_time() - cpu0
    up = time.perf_counter()
    await transport.connect()
    await asyncio.gather(*tasks)
    return cpu, time.perf_counter() - up


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--waiters", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    ev_cpu, ev_wake = await measure(evented, args.waiters, args.seconds)
    po_cpu, po_wake = await measure(polled, args.waiters, args.seconds)
    print(f"{args.waiters} waiters, link down {args.seconds:g} s")
    print(f"  event-based wait_connected: CPU {1000 * ev_cpu:7.2f} ms   wake {1000 * ev_wake:6.2f} ms")
    print(f"  20 Hz poll (before):        CPU {1000 * po_cpu:7.2f} ms   wake {1000 * po_wake:6.2f} ms")
    print(f"  ratio (poll / event): CPU {po_cpu / max(ev_cpu, 1e-6):.0f}×, "
          f"wake {po_wake / max(ev_wake, 1e-6):.0f}×")


if __name__ == "__main__":
    asyncio.run(main())
