"""``vllm bench serve`` of the stand-in: the same flags (those sparktui passes, others accepted and
ignored), a real client against the server's ``/v1/chat/completions`` (threads + ``http.client``,
streaming), and vLLM's result block on stdout (``vllm/benchmarks/serve.py``'s ``{:<40} {:<10.2f}``
lines), so sparktui's parser reads the stand-in and a real image alike."""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence

from sparktui.domain.bench import BenchPlan, RequestResult, StreamTimer, percentile, summarize_level


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm bench serve")
    p.add_argument("--backend", default="openai")
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", required=True)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--dataset-name", default="random")
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", default="inf")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--percentile-metrics", default="ttft,tpot,itl")
    p.add_argument("--metric-percentiles", default="99")
    p.add_argument("--num-warmups", type=int, default=0)
    p.add_argument("--disable-tqdm", action="store_true")
    return p


def _request(base: urllib.parse.SplitResult, endpoint: str, model: str, prompt: str, max_tokens: int,
             ignore_eos: bool) -> RequestResult:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "stream": True, "ignore_eos": ignore_eos,
                       "stream_options": {"include_usage": True}}).encode()
    timer = StreamTimer(time.monotonic())
    tokens: int | None = None
    prompt_tokens = 0
    conn = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port or 80, timeout=600)
    try:
        conn.request("POST", endpoint, body, {"content-type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            return RequestResult(timer.started, time.monotonic(), False, error=f"HTTP {response.status}")
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            usage = event.get("usage") or {}
            tokens = int(usage["completion_tokens"]) if "completion_tokens" in usage else tokens
            prompt_tokens = int(usage.get("prompt_tokens") or prompt_tokens)
            for choice in event.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    timer.token(time.monotonic())
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return RequestResult(timer.started, time.monotonic(), False, error=str(exc))
    finally:
        conn.close()
    return timer.result(time.monotonic(), tokens, prompt_tokens)


def _row(label: str, value: float | int) -> str:
    return f"{label:<40} {value:<10.2f}" if isinstance(value, float) else f"{label:<40} {value:<10}"


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    base = urllib.parse.urlsplit(args.base_url or f"http://{args.host}:{args.port}")
    plan = BenchPlan(input_len=args.random_input_len, output_len=args.random_output_len)
    concurrency = args.max_concurrency or args.num_prompts
    for i in range(args.num_warmups):
        _request(base, args.endpoint, args.model, plan.prompt(10_000_000 + i), args.random_output_len,
                 args.ignore_eos)
    print(f"Maximum request concurrency: {args.max_concurrency}", flush=True)
    results: list[RequestResult] = []
    lock = threading.Lock()
    next_index = [0]

    def worker() -> None:
        while True:
            with lock:
                index = next_index[0]
                if index >= args.num_prompts:
                    return
                next_index[0] += 1
            result = _request(base, args.endpoint, args.model, plan.prompt(index), args.random_output_len,
                              args.ignore_eos)
            with lock:
                results.append(result)

    threads = [threading.Thread(target=worker) for _ in range(min(concurrency, args.num_prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    level = summarize_level(concurrency, results)
    done = [r for r in results if r.ok]
    percents = [float(p) for p in args.metric_percentiles.split(",") if p.strip()]
    print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print(_row("Successful requests:", level.completed))
    if args.max_concurrency is not None:
        print(_row("Maximum request concurrency:", args.max_concurrency))
    print(_row("Benchmark duration (s):", level.seconds))
    print(_row("Total input tokens:", level.input_tokens))
    print(_row("Total generated tokens:", level.output_tokens))
    print(_row("Request throughput (req/s):", level.requests_s or 0.0))
    print(_row("Output token throughput (tok/s):", level.output_tok_s or 0.0))
    total = (level.output_tokens + level.input_tokens) / level.seconds if level.seconds else 0.0
    print(_row("Total Token throughput (tok/s):", total))
    tpot = [(r.ended - r.started - (r.ttft or 0.0)) / (r.output_tokens - 1)
            for r in done if r.output_tokens > 1]
    series = {"ttft": ("TTFT", "Time to First Token", [r.ttft for r in done if r.ttft is not None]),
              "tpot": ("TPOT", "Time per Output Token (excl. 1st token)", tpot),
              "itl": ("ITL", "Inter-token Latency", [g for r in done for g in r.itl])}
    for key in args.percentile_metrics.split(","):
        if key not in series:
            continue
        name, header, values = series[key]
        print("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        ms = [v * 1000.0 for v in values] or [0.0]
        print(_row(f"Mean {name} (ms):", sum(ms) / len(ms)))
        print(_row(f"Median {name} (ms):", percentile(ms, 50) or 0.0))
        for p in percents:
            word = str(int(p)) if int(p) == p else str(p)
            print(_row(f"P{word} {name} (ms):", percentile(ms, p) or 0.0))
    print("=" * 50, flush=True)
    return 0 if level.completed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
