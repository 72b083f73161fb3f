"""What a failed ``docker`` command on a node means, in words a user can act on (pure).

The causes are told apart by the docker client's own messages (the same in Debian's docker.io 20.10 and
Docker CE 28): not installed (the shell's "not found", exit 127), the daemon down ("Cannot connect to the
Docker daemon"), the user not allowed on its socket ("permission denied … docker.sock"), an image missing
("No such image"). Each message names the fix.
"""

from __future__ import annotations

from sparktui.domain.lifecycle.fixes import IMAGE_SYNC
from sparktui.domain.lifecycle.output import output_tail


def _last_line(stdout: str, stderr: str) -> str:
    tail = output_tail(stderr) or output_tail(stdout)
    return tail[-1] if tail else ""


def docker_problem(returncode: int, stdout: str, stderr: str) -> str:
    """Why ``docker version`` failed on a node (the message of its preflight check)."""
    text = stdout + stderr
    last = _last_line(stdout, stderr)
    if returncode == 127 or "docker: not found" in text or "docker: command not found" in text:
        return "docker is not installed (no `docker` on PATH): install Docker (`apt install docker.io`)"
    if "permission denied" in text.lower() and "docker" in text.lower() and ".sock" in text:
        return ("permission denied on the docker socket: add the user to the docker group "
                "(`sudo usermod -aG docker $USER`, then log in again)")
    if "Cannot connect to the Docker daemon" in text or "Is the docker daemon running" in text:
        return "the docker daemon is not running (`sudo systemctl start docker`): " + last
    if returncode == 124:
        return "`docker version` timed out: the docker daemon does not answer"
    return f"docker not usable (exit {returncode}): {last}"


def image_problem(image: str, node: str, head: str, stdout: str, stderr: str) -> str:
    """Why ``docker image inspect IMAGE`` failed on ``node``."""
    text = stdout + stderr
    if "No such image" in text or "No such object" in text or not text.strip():
        if node == head:
            return f"image {image} is not on {node}: `docker pull {image}` (or `docker load` it)"
        return (f"image {image} is not on {node}: `{IMAGE_SYNC}` copies it from {head} "
                f"(or `docker pull {image}` there)")
    return f"image {image}: {_last_line(stdout, stderr)}"


__all__ = ["docker_problem", "image_problem"]
