"""Runs on a worker node: argv = HEAD_HOST PORT TIMEOUT POLL RAY start ARG… — Ray's own ``RAY start ARG…``
(its CLI, ``ray.scripts.scripts.main``, the ``ray`` command's entry point, run in this process) once the GCS
at HEAD_HOST:PORT lists the head's node alive, or TIMEOUT s have passed (``ray start`` then says what is
wrong). RAY is the ``ray`` command as configured.

Why: ``ray start --address`` first asks the GCS for the head's node (its temp dir) and, finding none,
sleeps two seconds before it asks again (``get_all_node_info_until_retrieved``, Ray 2.x). Sent as soon as
the head's GCS port answered, a worker lost those two seconds on most starts; sent once the head's node was
there, it lost the second its CLI takes to import. Here the import runs while the head's raylet comes up,
and the start goes the moment the head's node is in the GCS.

Where this Python has no Ray (``engine.ray_python`` is not the one ``ray`` runs on), the wait is the same
and RAY itself is run in its place."""

from __future__ import annotations

import os
import sys
import time

from sparktui.node.gcs_grpc import head_node_wait


def main(argv: list[str]) -> None:
    host, port, limit, poll = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    ray, ray_args = argv[4], argv[5:]
    t0 = time.monotonic()
    try:
        from ray.scripts.scripts import main as ray_main
    except ImportError as exc:
        print(f"ray_join: no Ray in this Python ({exc}): {ray} in its place", file=sys.stderr, flush=True)
        print(f"ray_join: {head_node_wait(host, port, t0, limit, poll)}", flush=True)
        os.execvp(ray, [ray, *ray_args])
    imported = time.monotonic() - t0
    waited = head_node_wait(host, port, t0, limit, poll)
    sys.argv = [ray, *ray_args]
    try:
        sys.exit(ray_main())
    finally:  # (the last line of the output, after Ray's own: what a step's tail shows)
        print(f"ray_join: Ray's CLI in {imported:.2f} s; {waited}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
