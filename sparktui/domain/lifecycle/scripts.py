"""Constant scripts run on the nodes: ``["sh", "-c", SCRIPT, "$0-name", arg1, …]`` or
``[python, "-c", SCRIPT, arg1, …]`` (python puts "-c" in argv[0]).

The script text never contains a config value: every value arrives as a positional argument, so nothing
from config.toml is ever parsed by a shell. ``~`` in a path is expanded on the node (by ``$HOME`` or
``os.path.expanduser``), because a quoted word is not expanded by the remote shell.
"""

from __future__ import annotations

from sparktui.node import source

# ---- sh -------------------------------------------------------------------------------------------
#: $1 state dir, $2 log file name, $3 pid file name, then the command. Starts it in a new session
#: (no controlling terminal, own process group) with stdin from /dev/null and stdout+stderr to the log,
#: so it survives the SSH channel, the SSH connection and sparktui itself. Prints ``pid N``. The earlier
#: runs' logs were already kept aside by RUN_LOGS_PY, which runs it.
#: Not ``cmd &``: a non-interactive sh starts background commands with SIGINT ignored, and SIGINT is
#: vLLM's clean shutdown. ``setsid -f`` forks by itself; the child writes its pid and becomes the command.
DETACH_SH = r"""
set -eu
dir=$1 log=$2 pidf=$3
shift 3
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
mkdir -p "$dir"
rm -f "$dir/$pidf"
if command -v setsid >/dev/null 2>&1; then
  setsid -f sh -c 'echo "$$" >"$1"; shift; exec "$@"' sparktui-engine "$dir/$pidf" "$@" \
    </dev/null >"$dir/$log" 2>&1
  i=0
  while [ ! -s "$dir/$pidf" ] && [ "$i" -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
  pid=$(cat "$dir/$pidf" 2>/dev/null || true)
else
  nohup "$@" </dev/null >"$dir/$log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/$pidf"
fi
if [ -z "$pid" ]; then echo "the engine did not record its pid" >&2; exit 1; fi
echo "pid $pid"
"""

#: $1 state dir, $2 pid file name, $3 tag, $4 ticks of 0.1 s per signal. Stops the detached process
#: group: SIGINT (vLLM's own clean shutdown), then SIGTERM, then SIGKILL, each after ``ticks`` of waiting.
#: The pid is only signalled when its environment carries our tag (a recycled pid is left alone).
#: Exit 0 when nothing of ours runs any more; 1 when something survived SIGKILL.
STOP_DETACHED_SH = r"""
dir=$1 pidf=$2 tag=$3 ticks=$4
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
f=$dir/$pidf
if [ ! -f "$f" ]; then echo "not running (no pid file)"; exit 0; fi
pid=$(cat "$f")
ours() {
  [ -r "/proc/$pid/environ" ] &&
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SPARKTUI_TAG=$tag"
}
group_alive() { kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null; }
if ! ours; then echo "not running (pid $pid is gone)"; rm -f "$f"; exit 0; fi
for sig in INT TERM KILL; do
  kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid" 2>/dev/null || true
  echo "sent SIG$sig to process group $pid"
  i=0
  while [ "$i" -lt "$ticks" ]; do
    if ! group_alive; then echo "stopped after SIG$sig"; rm -f "$f"; exit 0; fi
    sleep 0.1
    i=$((i + 1))
  done
done
if group_alive; then echo "process group $pid survived SIGKILL"; exit 1; fi
rm -f "$f"
echo "stopped after SIGKILL"
"""

#: $1 state dir, $2 pid file name, $3 tag. Prints ``running PID``, ``exited PID`` or ``none``,
#: then ``log SIZE`` (or ``log -``) for $4 (the log file name).
DETACHED_STATE_SH = r"""
dir=$1 pidf=$2 tag=$3 log=$4
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
if [ -f "$dir/$pidf" ]; then
  pid=$(cat "$dir/$pidf")
  if [ -r "/proc/$pid/environ" ] &&
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SPARKTUI_TAG=$tag"; then
    echo "running $pid"
  else
    echo "exited $pid"
  fi
else
  echo "none"
fi
if [ -f "$dir/$log" ]; then echo "log $(wc -c <"$dir/$log") $dir/$log"; else echo "log - $dir/$log"; fi
"""

#: Prints the remote user's home directory.
HOME_SH = r'printf "%s" "$HOME"'

# ---- python: real modules in sparktui.node, shipped as their text -----------------------------------
#: ``sparktui/node/tagged.py`` (its argv and output are said there).
TAGGED_PY = source("tagged")

#: ``sparktui/node/facts.py`` (its argv and output are said there).
FACTS_PY = source("facts")

#: ``sparktui/node/ray_probe.py`` (its argv and output are said there).
RAY_PROBE_PY = source("ray_probe")

#: ``sparktui/node/follow.py`` (its argv and output are said there).
FOLLOW_PY = source("follow")

#: ``sparktui/node/ray_logs.py`` (its argv and output are said there).
RAY_LOGS_PY = source("ray_logs")

#: ``sparktui/node/read.py`` (its argv and output are said there).
READ_PY = source("read")

#: argv: DROP_CACHES_PATH. Frees the page cache (``engine.drop_caches``) where permitted: as root, else
#: through passwordless ``sudo -n``; otherwise exit 1 with the reason (the start goes on, warned).
DROP_CACHES_SH = r"""
path=$1
sync
before=$(awk '/^MemAvailable:/ {print int($2/1048576)}' /proc/meminfo 2>/dev/null)
if [ -w "$path" ] && (echo 3 > "$path") 2>/dev/null; then how=root
elif command -v sudo >/dev/null 2>&1 && echo 3 | sudo -n tee "$path" >/dev/null 2>&1; then how=sudo
else
    echo "page cache not freed: $path is not writable (needs root or passwordless sudo; engine.drop_caches)"
    exit 1
fi
after=$(awk '/^MemAvailable:/ {print int($2/1048576)}' /proc/meminfo 2>/dev/null)
echo "page cache freed ($how): MemAvailable ${before:-?} -> ${after:-?} GiB"
"""

#: ``sparktui/node/link.py`` (its argv and output are said there).
LINK_PY = source("link")

#: ``sparktui/node/lock.py`` (its argv and output are said there).
LOCK_PY = source("lock")

#: ``sparktui/node/json_file.py`` (its argv and output are said there): the desired state, the supervisor's
#: presence.
JSON_FILE_PY = source("json_file")

#: ``keep DIR LOG KEEP KEEP_BYTES -- COMMAND…`` / ``list DIR LOG``: each run's vLLM log kept (bounded) and the
#: run's start stamped, then COMMAND (the detach script) exec'd (``sparktui/node/run_logs.py``).
RUN_LOGS_PY = source("run_logs")
