"""Constant scripts run on the nodes: ``["sh", "-c", SCRIPT, "$0-name", arg1, …]`` or
``[python, "-c", SCRIPT, arg1, …]`` (python puts "-c" in argv[0]).

The script text never contains a config value: every value arrives as a positional argument, so nothing
from config.toml is ever parsed by a shell. ``~`` in a path is expanded on the node (by ``$HOME`` or
``os.path.expanduser``), because a quoted word is not expanded by the remote shell.
"""

from __future__ import annotations

# ---- sh -------------------------------------------------------------------------------------------
#: $1 state dir, $2 log file name, $3 pid file name, then the command. Starts it in a new session
#: (no controlling terminal, own process group) with stdin from /dev/null and stdout+stderr to the log,
#: so it survives the SSH channel, the SSH connection and sparktui itself. The previous log is kept
#: as ``<log>.prev``. Prints ``pid N``.
#: Not ``cmd &``: a non-interactive sh starts background commands with SIGINT ignored, and SIGINT is
#: vLLM's clean shutdown. ``setsid -f`` forks by itself; the child writes its pid and becomes the command.
DETACH_SH = r"""
set -eu
dir=$1 log=$2 pidf=$3
shift 3
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
mkdir -p "$dir"
if [ -e "$dir/$log" ]; then mv -f "$dir/$log" "$dir/$log.prev"; fi
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

# ---- python (the node's python3; standard library only) ---------------------------------------------
#: The start of TAGGED_PY and FACTS_PY: ``ours(tag)`` is {pid: command line} of the live processes whose
#: environment carries SPARKTUI_TAG=<tag> (Ray daemons, Ray workers, vLLM: they all inherit it) and of
#: their descendants, this script and zombies left out. Descendants count because a tag can vanish: Ray's
#: agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) rewrite their command line over their
#: environment (setproctitle), but they stay children of the tagged raylet.
_OURS_PY = r"""
import os

def ours(tag):
    needle = ("SPARKTUI_TAG=" + tag).encode()
    me = os.getpid()
    parent = {}
    tagged = set()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            parent[int(d)] = int(fields[1])
            with open("/proc/%s/environ" % d, "rb") as f:
                if needle in f.read().split(b"\0"):
                    tagged.add(int(d))
        except (OSError, ValueError, IndexError):
            continue
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in tagged and pid not in tagged and pid != me:
                tagged.add(pid)
                grew = True
    found = {}
    for pid in tagged:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                found[pid] = f.read().replace(b"\0", b" ").strip().decode("utf-8", "replace")
        except OSError:
            continue
    return found
"""

#: argv: MODE (list | stop) TAG [GRACE]. Finds our processes (``ours``). ``stop`` sends SIGTERM, waits up
#: to GRACE s, then SIGKILL and waits again. Prints one JSON object: what is left, and what was signalled.
TAGGED_PY = _OURS_PY + r"""
import json, signal, sys, time
mode, tag = sys.argv[1], sys.argv[2]
grace = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0

procs = ours(tag)
signalled = []

def signal_and_wait(sig, keep):
    global procs
    targets = {p: c for p, c in procs.items() if not keep(c)}
    for pid in targets:
        try:
            os.kill(pid, sig)
            signalled.append([pid, sig.name])
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while True:
        procs = ours(tag)
        if not [p for p in procs if p in targets] or time.monotonic() > deadline:
            return
        time.sleep(0.05)

if mode == "stop":
    # Ray's own order: everything but the GCS first (a raylet whose GCS is gone hangs in its shutdown),
    # then the GCS; SIGKILL for whatever outlived the grace.
    signal_and_wait(signal.SIGTERM, lambda cmd: "gcs_server" in cmd)
    if procs:
        signal_and_wait(signal.SIGTERM, lambda cmd: False)
    if procs:
        signal_and_wait(signal.SIGKILL, lambda cmd: False)
print(json.dumps({"processes": [{"pid": p, "cmdline": c[:400]} for p, c in sorted(procs.items())],
                  "signalled": signalled}))
"""

#: argv: one JSON object {"tag", "ports", "model_path", "rdma_devices"}. Prints one JSON object with the
#: node's facts for preflight: memory, RDMA ports, listening ports, our processes, the model directory.
FACTS_PY = _OURS_PY + r"""
import json, socket, sys
req = json.loads(sys.argv[1])
out = {"hostname": socket.gethostname(), "home": os.path.expanduser("~"), "python": sys.version.split()[0]}
mem = {}
try:
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            mem[k] = int(v.split()[0])
except OSError as e:
    out["meminfo_error"] = str(e)
out["mem_total_kb"] = mem.get("MemTotal")
out["mem_available_kb"] = mem.get("MemAvailable")
rdma = []
base = "/sys/class/infiniband"
try:
    devs = sorted(os.listdir(base))
except OSError:
    devs = []
for dev in devs:
    try:
        ports = sorted(os.listdir(os.path.join(base, dev, "ports")))
    except OSError:
        continue
    for port in ports:
        entry = {"device": dev, "port": port}
        for name in ("state", "phys_state", "link_layer", "rate"):
            try:
                with open(os.path.join(base, dev, "ports", port, name)) as f:
                    entry[name] = f.read().strip()
            except OSError:
                entry[name] = None
        rdma.append(entry)
out["rdma"] = rdma
out["dev_infiniband"] = os.path.isdir("/dev/infiniband")
listening = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        with open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) > 3 and parts[3] == "0A":
                    listening.add(int(parts[1].rsplit(":", 1)[1], 16))
    except (OSError, StopIteration):
        pass
out["ports_busy"] = sorted(p for p in req.get("ports", []) if p in listening)
out["processes"] = [{"pid": p, "cmdline": c[:400]} for p, c in sorted(ours(req["tag"]).items())]
path = req.get("model_path")
if path:
    path = os.path.expanduser(path)
    model = {"path": path, "exists": os.path.isdir(path), "files": [], "total_bytes": 0, "truncated": False}
    if model["exists"]:
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                full = os.path.join(root, name)
                try:
                    size = os.path.getsize(full)
                except OSError:
                    continue
                model["total_bytes"] += size
                if len(model["files"]) < 20000:
                    model["files"].append([os.path.relpath(full, path), size])
                else:
                    model["truncated"] = True
    out["model"] = model
print(json.dumps(out))
"""

#: The start of the streaming helpers (Ray probe, log follower): with ``stdin`` as their last argument they
#: end as soon as their stdin reaches EOF — when the channel that started them closes, or the sparktui that
#: opened it dies. A write to a closed channel is not enough: under ``docker exec`` the container's shim
#: holds the output open (the docker client dies, the helper never sees a broken pipe), and a follower of a
#: quiet log writes nothing for hours. ``docker exec -i`` carries the EOF into the container.
_STDIN_WATCH_PY = r"""
import os, sys, threading

def _until_stdin_closes():
    def watch():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        os._exit(0)
    threading.Thread(target=watch, daemon=True).start()

if sys.argv[-1] == "stdin":
    sys.argv.pop()
    _until_stdin_closes()
"""

#: argv: ADDRESS NODE_IP INTERVAL COUNT [stdin]. Connects to the Ray cluster once and prints one
#: ``RAYPROBE {json}`` line per INTERVAL (``ray.nodes()``: the same keys in Ray 2.9 … 2.60), COUNT times
#: at most; it also ends when the channel closes (the next print fails). ``RAYPROBE_ERROR {json}`` when
#: Ray cannot be imported or joined.
RAY_PROBE_PY = _STDIN_WATCH_PY + r"""
import json, logging, os, sys, time
addr, ip, interval, count = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
try:
    import ray
except Exception as e:
    print("RAYPROBE_ERROR " + json.dumps({"error": "cannot import ray: %s" % e}), flush=True)
    sys.exit(3)
try:
    ray.init(address=addr, _node_ip_address=ip, log_to_driver=False, logging_level=logging.ERROR)
except Exception as e:
    err = "ray.init(%s): %s: %s" % (addr, type(e).__name__, e)
    print("RAYPROBE_ERROR " + json.dumps({"error": err}), flush=True)
    sys.exit(4)
for _ in range(count):
    nodes = []
    for n in ray.nodes():
        res = n.get("Resources") or {}
        nodes.append({"node_id": n.get("NodeID"), "ip": n.get("NodeManagerAddress"),
                      "hostname": n.get("NodeManagerHostname"), "alive": bool(n.get("Alive", n.get("alive"))),
                      "gpu": float(res.get("GPU", 0.0)), "is_head": "node:__internal_head__" in res})
    cr = ray.cluster_resources()
    print("RAYPROBE " + json.dumps({"ray_version": ray.__version__, "t": time.time(), "nodes": nodes,
                                    "gpu_total": float(cr.get("GPU", 0.0))}, sort_keys=True), flush=True)
    time.sleep(interval)
"""

#: argv: PATH OFFSET INODE POLL [stdin]. Streams a growing file as frames on stdout: ``D <n>\n`` + n bytes of
#: data, ``R <inode>\n`` when the file is (or became) another file than INODE (offset restarts at 0:
#: a new engine run), ``W 0\n`` while the file does not exist. Resuming with the last OFFSET and INODE
#: after a dropped connection therefore loses and repeats nothing. Ends when its channel closes.
FOLLOW_PY = _STDIN_WATCH_PY + r"""
import os, sys, time
path, offset, ino, poll = os.path.expanduser(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
out = sys.stdout.buffer
def frame(kind, data=b"", n=None):
    out.write(b"%s %d\n" % (kind, len(data) if n is None else n) + data)
    out.flush()
f = None
waiting = False
while True:
    if f is None:
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            if not waiting:
                frame(b"W", n=0)
                waiting = True
            time.sleep(poll)
            continue
        waiting = False
        st = os.fstat(f.fileno())
        if str(st.st_ino) != ino or st.st_size < offset:
            ino, offset = str(st.st_ino), 0
            frame(b"R", ino.encode())
        f.seek(offset)
    data = f.read(262144)
    if data:
        offset += len(data)
        frame(b"D", data)
        continue
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is None or str(st.st_ino) != ino:
        rest = f.read()
        if rest:
            offset += len(rest)
            frame(b"D", rest)
        f.close()
        f = None
        continue
    if st.st_size < offset:
        f.close()
        f, ino = None, ""
        continue
    time.sleep(poll)
"""

#: argv: RAY_TEMP_DIR. Lists the files of the node's current Ray session log directory as JSON.
#: ``session_latest`` is an absolute symlink that only resolves where Ray wrote it (not on the host when
#: Ray runs in a container with its temp dir mounted): then the newest ``session_*`` directory is used.
RAY_LOGS_PY = r"""
import json, os, sys
temp = os.path.expanduser(sys.argv[1])
base = os.path.join(temp, "session_latest")
if not os.path.isdir(base):
    try:
        sessions = [os.path.join(temp, d) for d in os.listdir(temp) if d.startswith("session_2")]
    except OSError:
        sessions = []
    sessions = [d for d in sessions if os.path.isdir(d)]
    base = max(sessions, key=os.path.getmtime) if sessions else base
base = os.path.join(base, "logs")
files = []
try:
    for name in os.listdir(base):
        try:
            st = os.stat(os.path.join(base, name))
        except OSError:
            continue
        entry = {"name": name, "size": st.st_size, "mtime": st.st_mtime}
        if name.startswith("worker-"):
            # Ray writes ":job_id:<hex>" and ":actor_name:<class>" markers when a worker becomes an actor
            # (a pooled worker's file name keeps the job id ffffffff).
            try:
                with open(os.path.join(base, name), "rb") as f:
                    head = f.read(4096).decode("utf-8", "replace")
            except OSError:
                head = ""
            for line in head.splitlines():
                if line.startswith(":actor_name:"):
                    entry["actor"] = line[len(":actor_name:"):].strip()
                elif line.startswith(":job_id:"):
                    entry["job"] = line[len(":job_id:"):].strip()
        files.append(entry)
except OSError as e:
    print(json.dumps({"dir": base, "error": str(e), "files": []}))
    sys.exit(0)
print(json.dumps({"dir": os.path.realpath(base), "files": files}))
"""

#: argv: PATH [MAX_BYTES]. Writes the file's last MAX_BYTES bytes (all by default); exit 3 if missing.
READ_PY = r"""
import os, shutil, sys
path = os.path.expanduser(sys.argv[1])
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
try:
    with open(path, "rb") as f:
        if limit:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
        shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
except FileNotFoundError:
    sys.exit(3)
"""

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

#: argv: one JSON object {"sys_root", "interface", "peers": [address, …], "port"}. Prints one JSON object:
#: every RDMA port (state, link layer, netdev, RoCE v2 GID indices), the netdevs' speed / MTU / operstate,
#: and for each peer whether it answers from this node over the interface (a TCP connect from the
#: interface's address: a reset counts as reachable, a timeout or "no route" does not). Preflight's link
#: checks judge it (``sparktui.domain.lifecycle.links``).
LINK_PY = r"""
import errno, json, os, socket, struct, sys
req = json.loads(sys.argv[1])
root = req.get("sys_root") or "/sys"
def text(*parts):
    try:
        with open(os.path.join(*parts)) as f:
            return f.read().strip()
    except (OSError, ValueError):
        return None
def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []
ib = os.path.join(root, "class", "infiniband")
rdma, netdevs = [], set()
for dev in listdir(ib):
    for port in listdir(os.path.join(ib, dev, "ports")):
        base = os.path.join(ib, dev, "ports", port)
        types = {}
        for n in listdir(os.path.join(base, "gid_attrs", "types")):
            t = text(base, "gid_attrs", "types", n)
            if t:
                types[n] = t
        netdev = text(base, "gid_attrs", "ndevs", "0")
        if not netdev:
            nets = listdir(os.path.join(ib, dev, "device", "net"))
            netdev = nets[0] if nets else None
        if netdev:
            netdevs.add(netdev)
        rdma.append({"device": dev, "port": port, "state": text(base, "state"),
                     "link_layer": text(base, "link_layer"), "rate": text(base, "rate"), "netdev": netdev,
                     "rocev2_gids": sorted((int(n) for n, t in types.items() if t == "RoCE v2"))})
iface = req.get("interface")
if iface:
    netdevs.add(iface)
nets = {}
for name in sorted(netdevs):
    d = os.path.join(root, "class", "net", name)
    nets[name] = {"exists": os.path.isdir(d), "speed": text(d, "speed"), "mtu": text(d, "mtu"),
                  "operstate": text(d, "operstate")}
def if_addr(name):
    try:
        import fcntl
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            packed = struct.pack("256s", name[:15].encode())
            return socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24])   # SIOCGIFADDR
        finally:
            s.close()
    except OSError:
        return None
source = if_addr(iface) if iface else None
reach = {}
for peer in req.get("peers") or []:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3.0)
    try:
        if source:
            s.bind((source, 0))
        s.connect((peer, int(req.get("port") or 22)))
        reach[peer] = "ok"
    except ConnectionRefusedError:
        reach[peer] = "ok"
    except OSError as e:
        if e.errno:
            reach[peer] = errno.errorcode.get(e.errno, "") + " " + (e.strerror or str(e))
        else:
            reach[peer] = str(e) or "timed out"
    finally:
        s.close()
print(json.dumps({"rdma": rdma, "netdevs": nets, "interface": iface, "source": source, "reach": reach}))
"""

#: argv: ``take PATH HOLDER_JSON`` or ``show PATH``. The operation lock on the head (``state_dir``): one
#: start/stop/restart at a time across every sparktui on every machine.
#: ``take`` holds an flock on PATH for as long as its stdin stays open — the channel of the sparktui that
#: took it: when that sparktui ends, or dies, or its link drops, the channel closes and the lock is free
#: (no stale lock from a dead holder). It prints ``TAKEN {"previous": …}`` (the holder recorded in the file:
#: empty when the last holder released it cleanly, else one that vanished holding it) or ``HELD {holder}``.
#: A clean release writes ``release`` before the EOF and empties the file; an EOF alone (the holder died,
#: its link dropped) leaves the record for the next taker to report. ``show`` prints ``HELD {holder}`` or
#: ``FREE {}`` from /proc/locks, without touching the lock.
LOCK_PY = r"""
import fcntl, json, os, sys
mode, path = sys.argv[1], os.path.expanduser(sys.argv[2])

def recorded(fd):
    os.lseek(fd, 0, 0)
    data = os.read(fd, 65536).decode("utf-8", "replace").strip()
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {"unreadable": data[:200]}

if mode == "show":
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        print("FREE {}")
        sys.exit(0)
    ino = os.fstat(fd).st_ino
    held = False
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            if "FLOCK" in parts and len(parts) > 5 and parts[5].rsplit(":", 1)[-1] == str(ino):
                held = True
    print(("HELD " if held else "FREE ") + json.dumps(recorded(fd) if held else {}))
    sys.exit(0)

os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("HELD " + json.dumps(recorded(fd)), flush=True)
    sys.exit(3)
previous = recorded(fd)
os.ftruncate(fd, 0)
os.lseek(fd, 0, 0)
os.write(fd, (sys.argv[3] + "\n").encode())
os.fsync(fd)
print("TAKEN " + json.dumps({"previous": previous}), flush=True)
said = b""
try:
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        said += data
except OSError:
    pass
if b"release" in said:
    os.ftruncate(fd, 0)
"""
