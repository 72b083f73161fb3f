"""The CI engine image, built on this machine with no registry: Debian minbase + Python + Ray + sparktui.

What a user's vLLM image answers, the stand-in answers: ``vllm`` on the container's PATH runs
``python -m sparktui.sim.vllm_standin`` (so ``docker exec … vllm serve …``, ``vllm --version`` and
``vllm serve --help`` behave as in NVIDIA's image), ``ray`` and ``python3`` (with Ray) are on PATH.

Two layers, because they change at different rates:

* the **root filesystem** (``debootstrap --variant=minbase`` + a venv with Ray 2.60 and sparktui's
  dependencies, installed offline from wheels ``pip download``-ed from PyPI) is slow to make (~2 min) and
  cached as a tar under ``/var/cache/sparktui-ci`` by a hash of its recipe — outside the clone, since CI
  clones afresh on the same machine;
* **sparktui itself** (this checkout's ``sparktui/`` package) is copied on top for every test session
  (``docker import`` of the cached tar, then a ``COPY``; a few seconds).

The image is built in one test host's dockerd and reaches the others by ``docker save`` / ``docker load``
(two daemons cannot share a data root), which gives the same image ID everywhere — as a user without a
registry would copy it between Sparks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

REPO = Path(__file__).resolve().parents[2]
CACHE_ENV = "SPARKTUI_CI_CACHE"
DEFAULT_CACHE = Path("/var/cache/sparktui-ci")
SUITE = "bookworm"
#: bookworm's python3 (the wheels are downloaded for it, whatever Python runs the tests).
PY = "3.11"
#: Debian packages of the root filesystem (minbase has sh, coreutils, util-linux's setsid, grep).
PACKAGES = ("python3", "python3-venv", "procps")
RAY = "ray==2.60.0"
#: The tag every test host gets; the image ID is the same on all of them.
IMAGE = "sparktui-ci:test"
VENV = "/opt/venv"
#: Where the checkout's ``sparktui/`` package lands in the image (a .pth file puts it on sys.path).
SRC = "/opt/sparktui"
CONTAINER_PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: ``vllm`` inside the image: the stand-in engine, as NVIDIA's image has the real one.
VLLM_WRAPPER = f'#!/bin/sh\nexec {VENV}/bin/python -m sparktui.sim.vllm_standin "$@"\n'


class ImageError(RuntimeError):
    """Building or installing the CI image failed."""


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def requirements() -> list[str]:
    """Ray plus sparktui's own runtime dependencies (from pyproject.toml)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [RAY, *project["dependencies"]]


def recipe_hash() -> str:
    """Changes whenever the root filesystem would come out differently: the build function, the package
    lists, what is written into it (edits elsewhere in this file keep the cache)."""
    h = hashlib.sha256()
    h.update(inspect.getsource(_build_rootfs).encode())
    h.update("\n".join([SUITE, *PACKAGES, *requirements(), PY, VENV, SRC, VLLM_WRAPPER]).encode())
    return h.hexdigest()[:16]


def _run(argv: Sequence[str], *, timeout: float = 600, log: Path | None = None) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        raise ImageError(f"{' '.join(argv[:6])} … failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-1500:]}")
    return proc.stdout


def _mirror() -> str:
    """The machine's configured Debian mirror (deb822 or the classic sources.list)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    classic = Path("/etc/apt/sources.list")
    if classic.exists():
        for line in classic.read_text().splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "deb":
                return next(w for w in words[1:] if "://" in w)
    return "http://deb.debian.org/debian"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time (two CI runs on one machine share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def rootfs_tar(progress: bool = False) -> Path:
    """The cached root filesystem tar for the current recipe, built first when missing."""
    cache = cache_dir()
    target = cache / f"rootfs-{recipe_hash()}.tar"
    with _locked(cache / ".build.lock"):
        if target.exists():
            return target
        t0 = time.monotonic()
        work = cache / f"work-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        log = cache / "build.log"
        try:
            _build_rootfs(work, log, progress)
            tmp = target.with_suffix(".tmp")
            _run(["tar", "-C", str(work / "rootfs"), "--numeric-owner", "-cf", str(tmp), "."], log=log)
            tmp.replace(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        # Older recipes' tars are dead weight.
        for old in cache.glob("rootfs-*.tar"):
            if old != target:
                old.unlink(missing_ok=True)
        if progress:
            print(f"CI image root filesystem built in {time.monotonic() - t0:.0f} s: {target}",
                  file=sys.stderr)
        return target


def _build_rootfs(work: Path, log: Path, progress: bool) -> None:
    rootfs = work / "rootfs"
    def say(what: str) -> None:
        if progress:
            print(f"CI image: {what}", file=sys.stderr, flush=True)

    say(f"debootstrap {SUITE} (minbase + {', '.join(PACKAGES)})")
    # Its own mount namespace: debootstrap mounts proc/sys in the target, and they must not leak.
    _run(["unshare", "--mount", "debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
          SUITE, str(rootfs), _mirror()], timeout=900, log=log)
    say("wheels (pip download: Ray and sparktui's dependencies)")
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", PY,
          "-d", str(wheels),
          *requirements()], timeout=900, log=log)
    say("venv in the root filesystem (offline install)")
    inside = rootfs / "tmp" / "wheels"
    shutil.copytree(wheels, inside)
    install = (f"python3 -m venv {VENV} && {VENV}/bin/pip install -q --no-index --find-links /tmp/wheels "
               + " ".join(shlex.quote(r) for r in requirements()))  # (a marker holds quotes of its own)
    _run(["unshare", "--mount", "sh", "-c",
          'mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" && '
          'exec env -i PATH=/usr/bin:/bin /usr/sbin/chroot "$1" sh -c "$2"', "sh", str(rootfs), install],
         timeout=900, log=log)
    shutil.rmtree(inside)
    site = next((rootfs / VENV.lstrip("/") / "lib").glob("python3*/site-packages"))
    (site / "sparktui-src.pth").write_text(SRC + "\n")
    vllm = rootfs / VENV.lstrip("/") / "bin" / "vllm"
    vllm.write_text(VLLM_WRAPPER)
    vllm.chmod(0o755)
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                 "usr/share/locale"):
        for entry in (rootfs / junk).glob("*"):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def build_context(dest: Path, base: str) -> Path:
    """A docker build context: ``base`` + this checkout's ``sparktui`` package (no caches)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copytree(REPO / "sparktui", dest / "sparktui",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (dest / "Dockerfile").write_text(
        f"FROM {base}\n"
        f"COPY sparktui {SRC}/sparktui\n"
        f"ENV PATH={CONTAINER_PATH}\n"
        "LABEL org.opencontainers.image.title=sparktui-ci\n"
    )
    return dest


def install(bed: Testbed, *, progress: bool = False) -> str:
    """Build ``IMAGE`` in the first host's dockerd and copy it to the others; returns its image ID."""
    t0 = time.monotonic()
    tar = rootfs_tar(progress=progress)
    first, others = bed.names[0], bed.names[1:]
    base = f"sparktui-ci-base:{recipe_hash()}"
    bed.docker(first, "import", "--change", f"ENV PATH={CONTAINER_PATH}", str(tar), base, timeout=600)
    ctx = build_context(bed.dir / "image-context", base)
    # The classic builder: a 20.10 daemon and whatever client is first on PATH, no BuildKit needed.
    res = bed.exec(first, ["env", "DOCKER_BUILDKIT=0", "docker", "build", "-q", "-t", IMAGE, str(ctx)],
                   timeout=600)
    if res.returncode != 0:
        raise ImageError(f"{first}: docker build failed: {res.stderr.strip()[-1500:]}")
    shutil.rmtree(ctx, ignore_errors=True)
    image_id = bed.docker(first, "image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip()
    if others:
        saved = bed.dir / "image.tar"
        bed.docker(first, "save", "-o", str(saved), IMAGE, timeout=600)
        loads = {name: subprocess.Popen([*bed.nsenter(name), "docker", "load", "-q", "-i", str(saved)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for name in others}
        for name, proc in loads.items():
            _, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise ImageError(f"{name}: docker load failed: {err.strip()}")
    if progress:
        print(f"CI image {IMAGE} ({image_id[7:19]}) on {', '.join(bed.names)} "
              f"in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return image_id


def saved_image(bed: Testbed) -> Path:
    """The ``docker save`` tar of ``IMAGE`` that ``install`` left in the bed (to load it again)."""
    return bed.dir / "image.tar"


def derived_image(bed: Testbed, name: str, tag: str, env: dict[str, str]) -> str:
    """``FROM IMAGE`` plus ``ENV`` lines, built in host ``name``'s dockerd: an engine image whose stand-in
    vLLM differs (``sparktui.sim.standin_image``: its version, flags it lacks, its speed; or
    ``SPARKTUI_STANDIN_FAIL``). Returns its image ID."""
    ctx = bed.dir / f"derived-{tag.replace(':', '-').replace('/', '-')}"
    shutil.rmtree(ctx, ignore_errors=True)
    ctx.mkdir(parents=True)
    lines = [f"FROM {IMAGE}", *(f"ENV {key}={json.dumps(value)}" for key, value in env.items())]
    (ctx / "Dockerfile").write_text("\n".join(lines) + "\n")
    res = bed.exec(name, ["env", "DOCKER_BUILDKIT=0", "docker", "build", "-q", "-t", tag, str(ctx)],
                   timeout=300)
    shutil.rmtree(ctx, ignore_errors=True)
    if res.returncode != 0:
        raise ImageError(f"{name}: docker build of {tag} failed: {res.stderr.strip()[-1500:]}")
    return bed.docker(name, "image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()


__all__ = ["IMAGE", "ImageError", "build_context", "cache_dir", "derived_image", "install", "recipe_hash",
           "requirements", "rootfs_tar", "saved_image"]
