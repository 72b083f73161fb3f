"""A test bed of isolated SSH hosts (network + PID + UTS + mount namespaces, real sshd); needs root.

    with Testbed(("spark1", "spark2")) as bed:
        subprocess.run(bed.ssh_argv("spark1", "hostname"))

``python -m tests.testbed up`` builds one for manual runs and prints its config; ``down`` removes it.
"""

from tests.testbed import docker_image
from tests.testbed.bed import (
    Host,
    Testbed,
    TestbedError,
    docker_unavailable_reason,
    teardown_all,
    testbed_root,
    unavailable_reason,
)

__all__ = ["Host", "Testbed", "TestbedError", "docker_image", "docker_unavailable_reason", "teardown_all",
           "testbed_root", "unavailable_reason"]
