"""uvicorn's access log: requests served, and the monitoring probes that are neither served work nor news
(sparktui.domain.logs.access), on lines as uvicorn prints them and on the real recorded logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.domain.logs import Timeline, is_probe_request, parse_line
from sparktui.domain.logs.access import PROBE_PATHS, count_ok_requests

LOGS = Path(__file__).parent / "data" / "vllm-logs"

# uvicorn's access-log format: '%s - "%s %s HTTP/%s" %d' (client, method, path with query, version, status).
PROBES = [f'INFO:     127.0.0.1:{40000 + i} - "GET {path} HTTP/1.1" 200 OK'
          for i, path in enumerate(PROBE_PATHS)]
SERVED = [
    'INFO:     10.0.0.5:45344 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    'INFO:     10.0.0.5:45346 - "POST /v1/completions HTTP/1.0" 201 Created',
    'INFO:     10.0.0.5:45348 - "GET /v1/models/qwen HTTP/1.1" 200 OK',  # a model's card: no probe path
]


@pytest.mark.parametrize("line", [
    *PROBES,
    '(APIServer pid=9) INFO:     127.0.0.1:5 - "GET /metrics?name=vllm HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "HEAD /health HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /v1/models HTTP/1.1" 304 Not Modified',
])
def test_a_probe_answered_is_a_probe(line: str) -> None:
    assert is_probe_request(parse_line(line).message)


@pytest.mark.parametrize("line", [
    *SERVED,
    'INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 500 Internal Server Error',   # the engine dying: news
    'INFO:     127.0.0.1:5 - "GET /healthz HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "POST /health HTTP/1.1" 200 OK',
    "INFO 04-14 16:08:05 [api_server.py:1] Route: /health, Methods: GET",
])
def test_anything_else_is_no_probe(line: str) -> None:
    assert not is_probe_request(parse_line(line).message)


def test_probes_are_not_counted_as_requests_served() -> None:
    text = "\n".join([*PROBES, *SERVED, PROBES[0], 'INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 503 x'])
    assert count_ok_requests(text) == 3
    assert count_ok_requests(text, text.index("POST"), text.index("/v1/models/qwen")) == 2
    assert count_ok_requests("") == 0


@pytest.mark.parametrize(("prefix", "served"), [("01_", 1), ("02_", 22)])
def test_a_served_log_counts_its_completions_not_its_health_checks(prefix: str, served: int) -> None:
    # 01 and 02 (k8s: a liveness probe every few seconds) answer /health 10 and 18 times beside 1 and 22
    # completions, all after ready.
    text = next(LOGS.glob(prefix + "*")).read_text()
    probes = sum(1 for line in text.splitlines() if is_probe_request(parse_line(line).message))
    assert probes == text.count('"GET /health HTTP/1.1" 200') > 0
    assert text.count('HTTP/1.1" 2') - probes == served
    for feed in ("text", "records"):   # the bulk scan and the live path count alike
        tl = Timeline()
        if feed == "text":
            tl.feed_text(text)
        else:
            for line in text.splitlines():
                tl.feed(parse_line(line))
        assert tl.snapshot().outcome == "ready"
        assert tl._requests_served == served, feed


@pytest.mark.parametrize("extra", [
    "",
    'INFO:     1.2.3.4:5 - "HEAD /health HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "GET /metrics?x=1 HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "GET /ping HTTP/1.0" 200 OK',
    "INFO 04-14 16:08:05 [api_server.py:1] what? nothing",
])
def test_every_probe_form_is_left_out_of_the_count(extra: str) -> None:
    # Whatever the probes' forms, served = answered - probes.
    text = "\n".join([*PROBES, *SERVED, PROBES[1], extra])
    probes = sum(1 for line in text.splitlines() if is_probe_request(line))
    assert count_ok_requests(text) == text.count('HTTP/1.1" 2') + text.count('HTTP/1.0" 2') - probes
