"""A failed docker command on a node, told apart by the docker client's own words (Debian docker.io 20.10,
Docker CE 28) into a cause with its fix."""

from __future__ import annotations

from sparktui.domain.lifecycle.docker_diag import docker_problem, image_problem

# What docker 28.2's client prints for a user outside the docker group (exit 1).
PERMISSION = ("permission denied while trying to connect to the Docker daemon socket at "
              "unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.50/version\": "
              "dial unix /var/run/docker.sock: connect: permission denied\n")
DAEMON_DOWN = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
               "Is the docker daemon running?\n")


def test_not_installed() -> None:
    assert docker_problem(127, "", "sh: 1: exec: docker: not found\n").startswith("docker is not installed")


def test_permission_denied_names_the_docker_group() -> None:
    assert "add the user to the docker group" in docker_problem(1, "", PERMISSION)


def test_daemon_down() -> None:
    why = docker_problem(1, "", DAEMON_DOWN)
    assert why.startswith("the docker daemon is not running") and "Is the docker daemon running?" in why


def test_anything_else_keeps_the_last_line() -> None:
    assert docker_problem(2, "", "first\nsomething odd\n") == "docker not usable (exit 2): something odd"


def test_image_missing_on_a_worker_says_how_to_copy_it() -> None:
    why = image_problem("img:1", "spark2", "spark1", "", "Error: No such image: img:1\n")
    assert why == ("image img:1 is not on spark2: `sparktui image sync` copies it from spark1 "
                   "(or `docker pull img:1` there)")
    assert image_problem("img:1", "spark1", "spark1", "", "Error: No such image: img:1\n").endswith(
        "`docker pull img:1` (or `docker load` it)")


def test_image_copy_refuses_a_short_disk_and_reports_progress() -> None:
    from sparktui.domain.lifecycle.image_copy import NodeImage, disk_refusal, needs_copy, progress_line

    head = NodeImage("spark1", "sha256:a")
    assert not needs_copy(head, NodeImage("spark2", "sha256:a"))
    assert needs_copy(head, NodeImage("spark2", None)) and needs_copy(head, NodeImage("spark2", "sha256:b"))
    assert disk_refusal(NodeImage("spark2", None, 10_000_000_000), 4_000_000_000) is None
    assert disk_refusal(NodeImage("spark2", None, None), 4_000_000_000) is None
    why = disk_refusal(NodeImage("spark2", None, 3_000_000_000), 4_000_000_000)
    assert why == ("spark2: not enough disk for the image: 3,000.0 MB free where docker keeps images, "
                   "4,800.0 MB needed; free some (`docker system prune`)")
    assert progress_line("spark2", 50_000_000, 100_000_000, 2.0) == "spark2: 50.0 MB of 100.0 MB (25.0 MB/s)"
