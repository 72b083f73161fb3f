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
    assert why == ("image img:1 is not on spark2: copy it from spark1 (`docker save img:1 | ssh spark2 "
                   "docker load`) or `docker pull img:1` there")
    assert image_problem("img:1", "spark1", "spark1", "", "Error: No such image: img:1\n").endswith(
        "`docker pull img:1` (or `docker load` it)")
