"""`sparktui logs [--follow] [--node NAME] [--list] [--run N]`: the head's vLLM log, or a node's Ray worker
log, raw.

``--follow`` keeps streaming (resuming after a dropped connection without losing or repeating a byte)
until Ctrl-C. Each run's vLLM log is kept on the head (``engine.keep_logs``): ``--list`` lists them and
``--run N`` prints one (1 = the current run, 2 = the one before, …; or the file's name, as
``sparktui history`` gives it).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.remote.transport import Transport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 0 done, 1 node unreachable or no such log, 2 no usable config or node"
    parser.add_argument("-f", "--follow", action="store_true", help="keep streaming new lines")
    parser.add_argument("--node", metavar="NAME",
                        help="that node's Ray worker log (the vLLM worker output there) instead of the "
                        "head's vLLM log")
    parser.add_argument("--list", action="store_true", help="list the runs' vLLM logs kept on the head")
    parser.add_argument("--run", metavar="N", help="a previous run's vLLM log: 1 = the current run, 2 = the "
                        "one before, …; or a kept file's name (sparktui history --json: log_file)")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "logs", "Or try the simulated cluster: `sparktui --demo`."):
        return ExitStatus.USAGE
    if (args.list or args.run is not None) and (args.node is not None or args.follow):
        print("sparktui logs: --list and --run are the head's vLLM logs (no --node, no --follow)",
              file=sys.stderr)
        return ExitStatus.USAGE
    if args.node is not None:
        try:
            config.node(args.node)
        except KeyError:
            names = ", ".join(n.name for n in config.nodes)
            print(f"sparktui logs: no node named {args.node!r} (nodes: {names})", file=sys.stderr)
            return ExitStatus.USAGE
    try:
        return run_async(_logs(config, args))
    except KeyboardInterrupt:
        return ExitStatus.OK


async def _logs(config: SparkConfig, args: argparse.Namespace) -> int:
    from sparktui.remote.cluster import make_transport
    from sparktui.remote.transport import TransportError

    node = args.node or config.head.name
    # Only the node whose log is read: an unreachable other node must not delay or fail this.
    transport = make_transport(config.node(node))
    try:
        await transport.connect()
        await transport.wait_connected(timeout=30)
        return await _print_log(config, args, transport, node)
    except TransportError as exc:
        print(f"sparktui logs: {exc}", file=sys.stderr)
        return ExitStatus.NOT_WELL
    finally:
        await transport.close()


async def _print_log(config: SparkConfig, args: argparse.Namespace, transport: Transport, node: str) -> int:
    from sparktui.domain.lifecycle.frames import FileData, FileReset, FileWaiting
    from sparktui.domain.lifecycle.plan import vllm_log_path
    from sparktui.remote.file_read import stream_file
    from sparktui.remote.host_facts import read_home
    from sparktui.remote.log_follower import LogFollower
    from sparktui.remote.ray_logs import ray_worker_log_path

    if args.list or args.run is not None:
        return await _kept_log(config, args, transport)
    if args.node is not None:
        path = await ray_worker_log_path(config, transport, node)
        if path is None:
            print(f"sparktui logs: no Ray worker log on {node} (is Ray running there?)", file=sys.stderr)
            return ExitStatus.NOT_WELL
    else:
        home = await read_home(transport)
        homes = {node: home.stdout.strip()} if home.ok and home.stdout.strip() else None
        path = vllm_log_path(config, homes, node)
    out = sys.stdout.buffer
    python = config.node(node).python
    if not args.follow:
        # The whole file, byte for byte as it is on the node (binary or not UTF-8 included), as it arrives.
        if not await stream_file(transport, python, path, out.write):
            print(f"sparktui logs: {node}:{path} does not exist (engine never started?)", file=sys.stderr)
            return ExitStatus.NOT_WELL
        out.flush()
        return ExitStatus.OK

    # Runs until Ctrl-C: a dropped connection is resumed where it stopped.
    follower = LogFollower(transport, path, python=(python,))
    async with contextlib.aclosing(follower.events()) as events:
        async for event in events:
            match event:
                case FileData(data):
                    out.write(data)
                    out.flush()
                case FileWaiting():
                    print(f"sparktui logs: waiting for {node}:{path} to appear", file=sys.stderr, flush=True)
                case FileReset():
                    pass   # the next run's log: it follows from its first byte, as ``tail -F`` shows it
    return ExitStatus.OK


async def _kept_log(config: SparkConfig, args: argparse.Namespace, transport: Transport) -> int:
    """``--list`` the head's kept vLLM logs, or print one (``--run``)."""
    from sparktui.domain.lifecycle.argv import VLLM_LOG
    from sparktui.remote.file_read import stream_file
    from sparktui.remote.host_facts import read_home
    from sparktui.remote.run_logs import read_run_logs

    home = await read_home(transport)
    homes = {config.head.name: home.stdout.strip()} if home.ok and home.stdout.strip() else None
    logs = await read_run_logs(config, transport, homes)
    if logs is None:
        print(f"sparktui logs: could not list the vLLM logs on {config.head.name}", file=sys.stderr)
        return ExitStatus.NOT_WELL
    runs = [(VLLM_LOG, logs.started, logs.current_size)] if logs.current_size is not None else []
    runs += [(k.file, k.started, k.size) for k in logs.kept]
    if args.list:
        if not runs:
            print(f"no vLLM logs on {config.head.name}:{logs.folder}")
        for n, (name, started, size) in enumerate(runs, 1):
            at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "?"
            print(f"{n:>3}  {at}  {(size or 0) / 2**20:8.1f} MiB  {config.head.name}:{logs.folder}/{name}")
        return ExitStatus.OK
    wanted = str(args.run)
    names = [name for name, _, _ in runs]
    if wanted.isdigit() and 1 <= int(wanted) <= len(names):
        name = names[int(wanted) - 1]
    elif wanted in names:
        name = wanted
    else:
        print(f"sparktui logs: no run {wanted!r} kept on {config.head.name} ({len(names)} kept; --list)",
              file=sys.stderr)
        return ExitStatus.NOT_WELL
    out = sys.stdout.buffer
    if not await stream_file(transport, config.head.python, f"{logs.folder}/{name}", out.write):
        print(f"sparktui logs: {config.head.name}:{logs.folder}/{name} is gone", file=sys.stderr)
        return ExitStatus.NOT_WELL
    out.flush()
    return ExitStatus.OK
