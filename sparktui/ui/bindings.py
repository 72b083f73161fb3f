"""The dashboard's keys: every binding with its id (``[ui.keys]`` remaps it by that id; its default keys come
from ``domain.keys.DEFAULT_KEYS``), the footer's order and the palette's titles."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from sparktui.domain.keys import DEFAULT_KEYS

#: The actions that start or stop something on the nodes (off in read-only mode).
LIFECYCLE_ACTIONS = ("start", "restart", "stop")

#: The footer's keys, most important first: at any width it shows those of them that fit, dropping from
#: the end (Help and Quit stay even at 80 columns). Keys not listed here are in the help and the palette.
FOOTER_RANK = ("help", "quit", "start", "stop", "restart", "smoke_test", "find", "filter", "full_log",
               "level", "log_source", "node")

#: The palette's name of an action where its footer label alone says too little.
PALETTE_TITLES = {
    "start": "Start engine", "restart": "Restart engine", "stop": "Stop engine", "bench": "Benchmark",
    "bench_chart": "Benchmark chart",
    "fix": "Fix failed check", "find": "Find in log", "filter": "Filter log", "level": "Log level",
    "node": "Log of one node", "log_source": "Log source", "full_log": "Full-screen log",
    "wrap": "Wrap log lines", "probes": "Probe lines in the log", "help": "Keys (help)",
}


def binding(binding_id: str, action: str, label: str, tooltip: str = "", *, show: bool = True) -> Binding:
    """A binding whose default keys come from ``DEFAULT_KEYS`` (what ``[ui.keys]`` is checked against)."""
    return Binding(DEFAULT_KEYS[binding_id], action, label, id=binding_id, tooltip=tooltip, show=show)


DASHBOARD_BINDINGS: list[BindingType] = [
    binding("start", "start", "Start", "Preflight, then start the engine on every node"),
    binding("restart", "restart", "Restart", "Stop, then start (asks first)"),
    binding("stop", "stop", "Stop", "Stop vLLM, Ray and our containers (asks first)"),
    binding("smoke_test", "smoke_test", "Smoke test", "One streaming completion"),
    binding("bench", "bench", "Bench",
            "A short benchmark (c=1 and 4), saved and compared with the last one", show=False),
    binding("linktest", "linktest", "Link test",
            "Measure the cable between the nodes against NVIDIA's pass mark", show=False),
    binding("fix", "fix", "Fix",
            "Run the command a failed preflight check offers (image sync, model sync), after asking",
            show=False),
    binding("find", "find", "Find", "Find text in the log"),
    binding("help", "toggle_help", "Help", "Every key, grouped, and what it does"),
    binding("quit", "quit", "Quit", "Quit the dashboard (a running engine keeps running)"),
    binding("filter", "filter", "Filter", "Show only log lines containing a text"),
    binding("level", "cycle_level", "Level", "Minimum log level: all/INFO/WARNING/ERROR"),
    binding("node", "cycle_node", "Node", "Show log lines of one node only"),
    binding("log_source", "cycle_source", "Source",
            "Switch between the vLLM log and each node's Ray worker log"),
    binding("full_log", "toggle_full_log", "Full log", "Full-screen log"),
    binding("processes", "processes", "Processes", "Our processes on every node, sortable", show=False),
    binding("bench_chart", "bench_chart", "Bench chart",
            "The last benchmark's output tok/s per level against the previous run of the same setup, "
            "TTFT and the decode ceiling", show=False),
    binding("engine", "toggle_engine_focus", "Engine",
            "Scroll the engine column (arrows, j/k, PgUp/PgDn, Home/End); again: back to the log",
            show=False),
    binding("pause", "toggle_pause", "Pause charts", "Hold the node charts and readings still",
            show=False),
    binding("find_next", "find_next(True)", "Next match", show=False),
    binding("find_previous", "find_next(False)", "Previous match", show=False),
    # The log's movement keys, as less and vim have them, from anywhere (a text field keeps its own).
    binding("log_down", "log_lines(1)", "Down a line", show=False),
    binding("log_up", "log_lines(-1)", "Up a line", show=False),
    binding("log_page_down", "log_pages(1)", "Page down", show=False),
    binding("log_page_up", "log_pages(-1)", "Page up", show=False),
    binding("log_top", "log_top", "Top of the log", show=False),
    binding("follow", "follow", "Follow log", show=False),
    binding("wrap", "toggle_wrap", "Wrap", "Fold long log lines", show=False),
    binding("probes", "toggle_probes", "Probes",
            "Show or hide monitoring probes' lines (GET /health, /metrics) in the log", show=False),
    binding("copy_line", "copy_line", "Copy line",
            "Copy the current match (or the last line in view) to the clipboard", show=False),
    binding("save_log", "save_log", "Save log", "Save the log as shown (filters applied) to a file",
            show=False),
]
