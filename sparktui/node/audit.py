"""argv: one JSON object; each key asks for one part of the node's facts (``sparktui.domain.audit`` builds it
and compares the nodes' answers):

- ``model``: {"path": DIR} or {"hf_id": "org/name", "hf_home": DIR?}: every file of the model directory
  with its size, and the SHA-256 of each file under ``hash_bound`` bytes that is not a weight shard;
- ``mounts``: [PATH, …]: each one's kind (file, dir, missing), size, and a file's SHA-256 under the bound;
- ``engine``: {"env_names": [...], "env_prefixes": [...]}: this Python's view of the engine's world: the
  environment variables named or prefixed so (secrets as a digest, never their value), vLLM's version, and
  which libnccl would load (vLLM's override, a pip ``nvidia-nccl-cu*`` wheel, or the system's);
- ``net``: {"peers": [ADDRESS, …]}: every interface's IPv4 address, the cable's netdevs (those of the RDMA
  ports), and the source address this node would use toward each peer;
- ``image``: the image whose ID ``docker image inspect`` gives.

Prints one JSON object with the same keys (and ``hostname``). Nothing is written; every read is bounded.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import socket
import subprocess
import sys
from typing import Any

from sparktui.node.hf_cache import snapshot
from sparktui.node.if_addr import if_addr

#: Weight files: their size is compared, never their hash (GBs each).
SHARD_ENDINGS = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz")
#: A variable whose name holds one of these is a secret: only its digest leaves the node.
SECRET_MARKS = ("TOKEN", "SECRET", "PASSWORD", "KEY")
MAX_FILES = 20000


def sha256(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def model_files(req: dict[str, Any], bound: int) -> dict[str, Any]:
    path = req.get("path") or ""
    if not path and req.get("hf_id"):
        hf_home = os.path.expanduser(req.get("hf_home") or os.environ.get("HF_HOME")
                                     or "~/.cache/huggingface")
        repo = os.path.join(hf_home, "hub", "models--" + str(req["hf_id"]).replace("/", "--"))
        path = snapshot(repo) or repo
    path = os.path.expanduser(path)
    files: list[list[object]] = []
    out: dict[str, Any] = {"path": path, "exists": os.path.isdir(path), "files": files, "truncated": False}
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            if len(files) >= MAX_FILES:
                out["truncated"] = True
                return out
            full = os.path.join(root, name)
            try:
                size = os.path.getsize(full)       # through the HF cache's symlinks to its blobs
            except OSError:
                continue
            small = size <= bound and not name.endswith(SHARD_ENDINGS)
            files.append([os.path.relpath(full, path), size, sha256(full) if small else None])
    return out


def mount_facts(paths: list[str], bound: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for given in paths:
        path = os.path.expanduser(given)
        if os.path.isfile(path):
            size = os.path.getsize(path)
            out[given] = {"kind": "file", "size": size, "sha256": sha256(path) if size <= bound else None}
        elif os.path.isdir(path):
            try:
                entries: int | None = len(os.listdir(path))
            except OSError:
                entries = None
            out[given] = {"kind": "dir", "entries": entries}
        else:
            out[given] = {"kind": "missing"}
    return out


def shown_value(name: str, value: str) -> str:
    if any(mark in name.upper() for mark in SECRET_MARKS):
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12]
    return value


def nccl_library() -> dict[str, Any]:
    """Which libnccl a vLLM in this Python would load. vLLM's ``find_nccl_library`` (vllm/utils) takes
    $VLLM_NCCL_SO_PATH, else ctypes loads "libnccl.so.2" after torch, which finds the one torch already
    loaded: the pip ``nvidia-nccl-cu*`` wheel's when it is installed, else the system's. A libnccl in
    $LD_PRELOAD comes before all of them."""
    preload = [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if "libnccl" in p]
    override = os.environ.get("VLLM_NCCL_SO_PATH") or (preload[0] if preload else None)
    out: dict[str, Any] = {"override": override, "pip": None, "pip_version": None, "system": []}
    try:
        import nvidia.nccl as wheel
        for base in list(getattr(wheel, "__path__", [])):
            libs = sorted(glob.glob(os.path.join(base, "lib", "libnccl.so*")))
            if libs:
                out["pip"] = libs[-1]
                break
    except ImportError:
        pass
    try:
        from importlib import metadata
        for dist in metadata.distributions():
            name = str(dist.metadata["Name"] or "").lower()
            if name.startswith("nvidia-nccl"):
                out["pip_version"] = name + " " + str(dist.version)
    except Exception:
        pass
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            res = subprocess.run([ldconfig, "-p"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        out["system"] = [line.rsplit("=>", 1)[1].strip() for line in res.stdout.splitlines()
                         if "libnccl.so" in line and "=>" in line]
        break
    out["loads"] = out["override"] or out["pip"] or (out["system"][0] if out["system"] else None)
    return out


def engine_facts(req: dict[str, Any]) -> dict[str, Any]:
    names = set(req.get("env_names") or ())
    prefixes = tuple(req.get("env_prefixes") or ())
    env = {k: shown_value(k, v) for k, v in sorted(os.environ.items())
           if k in names or k.startswith(prefixes)}
    version = None
    try:
        from importlib import metadata
        version = metadata.version("vllm")
    except Exception:
        pass
    return {"python": sys.executable, "vllm": version, "env": env, "nccl": nccl_library()}


def route_source(peer: str) -> str | None:
    """The address this node sends from toward ``peer`` (a UDP connect picks the route; nothing is sent)."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((peer, 9))
            return str(s.getsockname()[0])
        finally:
            s.close()
    except OSError:
        return None


def net_facts(req: dict[str, Any]) -> dict[str, Any]:
    try:
        names = sorted(n for _, n in socket.if_nameindex())
    except OSError:
        names = []
    cable = sorted({os.path.basename(p) for p in glob.glob("/sys/class/infiniband/*/device/net/*")})
    return {"interfaces": {n: if_addr(n) for n in names}, "cable": cable,
            "routes": {p: route_source(p) for p in req.get("peers") or ()}}


def image_id(image: str) -> str | None:
    try:
        res = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return (res.stdout.strip() or None) if res.returncode == 0 else None


def main(argv: list[str]) -> None:
    req = json.loads(argv[0])
    bound = int(req.get("hash_bound") or 64 << 20)
    out: dict[str, Any] = {"hostname": socket.gethostname()}
    if "model" in req:
        out["model"] = model_files(req["model"], bound)
    if "mounts" in req:
        out["mounts"] = mount_facts(list(req["mounts"]), bound)
    if "engine" in req:
        out["engine"] = engine_facts(req["engine"])
    if "net" in req:
        out["net"] = net_facts(req["net"])
    if req.get("image"):
        out["image_id"] = image_id(req["image"])
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
