"""The CPU one frame at ready costs: a new sample for each node (its readings changed), drained, the two
node panels repainted and the screen composited — the frame an idle dashboard draws once a second. The
naive way in the same run: the same samples, the whole screen repainted with each.

Headless (Textual's ``run_test``, 160×50, the fake backend of the tests), one core, process time:

    .venv/bin/python benchmarks/bench_frame.py [--frames 300]

It also counts the widgets that render for one such frame (Textual's compositor renders every widget whose
clip overlaps the box around the changed regions; the screen's direct children clip to the whole screen).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from textual.geometry import Region
from textual.widget import Widget

from sparktui.domain.events import EngineChanged, EngineState, NodeLinkChanged
from tests.test_ui_panels import gb10_sample
from tests.ui_fakes import make_app, settle

NODES = ("spark1", "spark2")
FRAME_GAP = 0.05   # seconds between samples: each gets a frame of its own (Textual draws at most 60 a second)


async def measure(frames: int) -> dict[str, Any]:
    app, backend = make_app()
    seq = 10
    rendered: Counter[str] = Counter()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        for name in NODES:
            backend.post(NodeLinkChanged(name, "connected"),
                         backend.sampled(name, gb10_sample(1, 10_000)),
                         backend.sampled(name, gb10_sample(2, 20_000)))
        backend.post(EngineChanged(EngineState.READY, "serving"))
        await settle(pilot, app)
        await asyncio.sleep(1.5)
        await pilot.pause()

        async def run(n: int, *, sample: bool, whole_screen: bool = False) -> float:
            nonlocal seq
            t0 = time.process_time()
            for _ in range(n):
                if sample:
                    seq += 1
                    for name in NODES:   # a GPU busy figure that changes: the panel's text changes
                        reading = gb10_sample(seq, seq * 10_000, util=float(seq % 90))
                        backend.post(backend.sampled(name, reading))
                    if whole_screen:
                        app.screen.refresh()
                await asyncio.sleep(FRAME_GAP)
            return (time.process_time() - t0) / n

        await run(20, sample=True)
        loop = await run(frames, sample=False)
        frame = await run(frames, sample=True) - loop
        naive = await run(frames, sample=True, whole_screen=True) - loop

        original = Widget.render_lines

        def counting(self: Widget, crop: Region) -> Any:
            rendered[type(self).__name__] += 1
            return original(self, crop)

        Widget.render_lines = counting  # type: ignore[method-assign]
        try:
            await run(1, sample=True)
            await asyncio.sleep(0.2)
        finally:
            Widget.render_lines = original  # type: ignore[method-assign]
    return {"frame_ms": frame * 1e3, "naive_ms": naive * 1e3, "loop_ms": loop * 1e3,
            "rendered": rendered}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=300)
    args = parser.parse_args()
    got = asyncio.run(measure(args.frames))
    frames = max(1, got["rendered"]["Screen"])   # the screen renders once in every frame
    widgets = sum(got["rendered"].values()) / frames
    print(f"one ready frame (2 node samples, their panels repainted): {got['frame_ms']:.2f} ms of CPU")
    print(f"the whole screen repainted with each sample (naive):      {got['naive_ms']:.2f} ms "
          f"-> {got['naive_ms'] / got['frame_ms']:.1f}x")
    print(f"the event loop alone, per {FRAME_GAP * 1e3:.0f} ms: {got['loop_ms']:.3f} ms")
    print(f"widgets rendered a frame: {widgets:.0f} over {frames} frame(s) for one sample of each node "
          f"({', '.join(f'{k} {v}' for k, v in got['rendered'].most_common())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
