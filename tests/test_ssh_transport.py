"""The SSH transport against real sshd on the test hosts: commands, streams, forwards, reconnects, keys."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sparktui.config import NodeConfig, load_config
from sparktui.domain.backoff import Backoff
from sparktui.remote.cluster import close_cluster, make_transport, open_cluster
from sparktui.remote.ssh import SSHTransport
from sparktui.remote.transport import LinkPhase, LinkState, Transport, TransportError
from tests.cli_helpers import run_sparktui
from tests.conftest import MakeTestbed
from tests.testbed import Testbed

pytestmark = pytest.mark.testbed

#: Values a remote shell would love to interpret; each must arrive as one literal argument.
NASTY = [
    "x; touch /tmp/pwned",
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "a && touch /tmp/pwned",
    "a | touch /tmp/pwned",
    "'; touch /tmp/pwned; '",
    '"; touch /tmp/pwned; "',
    "line1\nline2; touch /tmp/pwned",
    "~/not-expanded * ? [a] $HOME ${HOME}",
    "-n",
    "",
    "tab\there > /tmp/pwned",
]


def _node(bed: Testbed, name: str, **overrides: object) -> NodeConfig:
    return bed.spark_config(nodes={name: overrides}).node(name)


@pytest.fixture
async def spark1(testbed: Testbed) -> AsyncIterator[SSHTransport]:
    transport = SSHTransport(_node(testbed, "spark1"))
    await transport.connect()
    try:
        yield transport
    finally:
        await transport.close()


async def _wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    """Seconds until ``predicate`` holds; fails the test after ``timeout``."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(step)
    return time.monotonic() - t0


def _assert_not_pwned(bed: Testbed, name: str) -> None:
    assert not (bed.host_tmp(name) / "pwned").exists()
    assert bed.exec(name, ["test", "-e", "/tmp/pwned"]).returncode != 0


# -- commands --------------------------------------------------------------------------------------
async def test_run_returns_output_status_and_stdin(spark1: SSHTransport) -> None:
    result = await spark1.run(["hostname"])
    assert result.ok and result.stdout.strip() == "spark1"
    result = await spark1.run(["sh", "-c", "cat; echo err >&2; exit 3"], input=b"from stdin")
    assert (result.returncode, result.stdout, result.stderr) == (3, "from stdin", "err\n")
    result = await spark1.run(["definitely-not-a-command-xyz"])
    assert result.returncode == 127


async def test_shell_metacharacters_arrive_as_one_literal_argument(
    testbed: Testbed, spark1: SSHTransport
) -> None:
    result = await spark1.run(["printf", "%s\\0", *NASTY])
    assert result.ok, result.stderr
    assert result.stdout.split("\0")[:-1] == NASTY
    result = await spark1.run(["sh", "-c", 'printf "%s" "$NASTY"'], env={"NASTY": NASTY[0]})
    assert result.stdout == NASTY[0]
    _assert_not_pwned(testbed, "spark1")


async def test_model_path_from_config_reaches_the_node_literally(testbed: Testbed, tmp_path: Path) -> None:
    path = testbed.write_config(tmp_path / "config.toml", engine={"model": "x; touch /tmp/pwned"})
    config = load_config(path)
    transports = await open_cluster(config)
    try:
        for name, transport in transports.items():
            result = await transport.run(["printf", "%s\\n", config.engine.model])
            assert result.stdout == "x; touch /tmp/pwned\n"
            _assert_not_pwned(testbed, name)
    finally:
        await close_cluster(transports)


async def test_run_timeout_hangs_the_command_up(testbed: Testbed, spark1: SSHTransport) -> None:
    marker = f"30.{time.monotonic_ns() % 10**9}"  # a sleep duration no other test uses
    result = await spark1.run(["sleep", marker], timeout=0.5)
    assert result.returncode == 124
    await _wait_for(lambda: testbed.exec("spark1", ["pgrep", "-f", f"sleep {marker}"]).returncode != 0, 5)


async def test_stream_yields_chunks_and_terminate_ends_the_remote_process(
    testbed: Testbed, spark1: SSHTransport
) -> None:
    script = "trap 'echo hup > /tmp/stream-hup; exit 0' HUP; printf 'a\\0b'; while :; do sleep 0.1; done"
    proc = await spark1.start(["sh", "-c", script])
    received = b""
    async for chunk in proc.chunks():
        received += chunk
        if received == b"a\0b":
            break
    proc.terminate()
    await asyncio.wait_for(proc.wait(), 10)
    await _wait_for(lambda: (testbed.host_tmp("spark1") / "stream-hup").exists(), 5)
    (testbed.host_tmp("spark1") / "stream-hup").unlink()


async def test_close_right_after_terminate_still_hangs_up_and_raises_nothing(testbed: Testbed) -> None:
    # The dashboard's quit: helpers terminated, then the link closed at once; the HUP by PID must still
    # reach the node, and no background task may die with an error nobody reads.
    errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    flag = testbed.host_tmp("spark1") / "close-hup"
    transport = SSHTransport(_node(testbed, "spark1"))
    await transport.connect()
    try:
        proc = await transport.start(["sh", "-c", "trap 'echo hup > /tmp/close-hup; exit 0' HUP; "
                                      "echo up; while :; do sleep 0.1; done"])
        async for chunk in proc.chunks():
            if b"up" in chunk:
                break
        proc.terminate()
    finally:
        await transport.close()
    await _wait_for(flag.exists, 5)
    flag.unlink()
    gc.collect()  # an unretrieved task exception is reported when the task is collected
    await asyncio.sleep(0)
    assert errors == []


async def test_stream_stdin_and_stderr(spark1: SSHTransport) -> None:
    proc = await spark1.start(["sh", "-c", "cat; echo done >&2"])
    await proc.write(b"ping\n")
    await proc.close_stdin()
    out = b"".join([chunk async for chunk in proc.chunks()])
    assert out == b"ping\n"
    assert await proc.wait() == 0
    assert await proc.stderr_text() == "done\n"


async def test_channels_share_one_connection(spark1: SSHTransport) -> None:
    conn = spark1.connection
    results = await asyncio.gather(*(spark1.run(["echo", str(i)]) for i in range(20)))
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(20)]
    assert spark1.connection is conn


async def test_forward_port_reaches_a_port_on_the_node(testbed: Testbed, spark1: SSHTransport) -> None:
    local = await spark1.forward_port("127.0.0.1", 22)
    assert await spark1.forward_port("127.0.0.1", 22) == local  # kept and reused
    reader, writer = await asyncio.open_connection("127.0.0.1", local)
    banner = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert banner.startswith(b"SSH-2.0-OpenSSH")


# -- connection supervision ------------------------------------------------------------------------
async def test_killed_sshd_turns_node_retrying_then_reconnects_on_its_own(make_testbed: MakeTestbed) -> None:
    bed = make_testbed()
    transports = await open_cluster(bed.spark_config())
    seen: list[LinkState] = []
    transports["spark2"].add_listener(lambda _name, state: seen.append(state))
    try:
        assert all(t.state.phase is LinkPhase.CONNECTED for t in transports.values())
        bed.kill_sshd("spark2")  # the listener and every established session
        noticed = await _wait_for(lambda: any(s.phase is LinkPhase.RETRYING for s in seen), 10)
        assert noticed < 10
        retrying = next(s for s in seen if s.phase is LinkPhase.RETRYING)
        assert retrying.retry_at is not None and retrying.last_error
        assert "retrying in" in retrying.describe()
        # spark1 is untouched and keeps working.
        assert transports["spark1"].state.phase is LinkPhase.CONNECTED
        assert (await transports["spark1"].run(["hostname"])).stdout.strip() == "spark1"
        # While spark2 is down, a command fails with TransportError after a bounded wait.
        transports["spark2"].reconnect_wait = 0.5  # type: ignore[attr-defined]
        with pytest.raises(TransportError):
            await transports["spark2"].run(["hostname"])
        bed.start_sshd("spark2")
        await transports["spark2"].wait_connected(timeout=40)
        assert (await transports["spark2"].run(["hostname"])).stdout.strip() == "spark2"
    finally:
        await close_cluster(transports)


async def test_dropped_sessions_reconnect_and_forward_keeps_its_port(make_testbed: MakeTestbed) -> None:
    bed = make_testbed(["solo"])
    transport = make_transport(_node(bed, "solo"))

    def faulty_listener(_name: str, _state: LinkState) -> None:
        raise RuntimeError("a buggy UI callback")

    # Phases as they happen: the reconnect can be quicker than a poll of ``state`` (sshd keeps listening).
    phases: list[LinkPhase] = []
    transport.add_listener(lambda _name, state: phases.append(state.phase))
    transport.add_listener(faulty_listener)  # must not stop the supervisor
    await transport.connect()
    try:
        local = await transport.forward_port("127.0.0.1", 22)
        seen = len(phases)
        bed.kill_ssh_sessions("solo")  # sshd keeps listening
        await _wait_for(lambda: any(p is not LinkPhase.CONNECTED for p in phases[seen:]), 30)
        await transport.wait_connected(timeout=30)
        assert await transport.forward_port("127.0.0.1", 22) == local
        assert (await transport.run(["hostname"])).stdout.strip() == "solo"
    finally:
        await transport.close()


async def test_dead_link_is_noticed_by_keepalives(make_testbed: MakeTestbed) -> None:
    bed = make_testbed(["solo"])
    transport = SSHTransport(_node(bed, "solo"))
    await transport.connect()
    try:
        assert transport.state.phase is LinkPhase.CONNECTED
        bed.link_down("solo")  # no RST, no FIN: only keepalives can tell
        noticed = await _wait_for(lambda: transport.state.phase is not LinkPhase.CONNECTED, 20, step=0.2)
        assert noticed < 12, f"dead link noticed after {noticed:.1f} s"
        assert "keepalive" in (transport.state.last_error or "")
        bed.link_up("solo")
        await transport.wait_connected(timeout=40)
    finally:
        await transport.close()


async def test_reconnects_soon_after_sshd_returns_not_after_the_backoff(make_testbed: MakeTestbed) -> None:
    """A minute's backoff is not waited out: a TCP connect every second notices sshd back."""
    bed = make_testbed(["solo"])
    transport = SSHTransport(_node(bed, "solo"), backoff=Backoff(initial=60.0, maximum=60.0, jitter=0.0))
    await transport.connect()
    try:
        bed.kill_sshd("solo")
        await _wait_for(lambda: transport.state.phase is LinkPhase.RETRYING
                        and (transport.state.retry_in() or 0) > 30, 20)
        bed.start_sshd("solo")
        back = await _wait_for(lambda: transport.state.phase is LinkPhase.CONNECTED, 45, step=0.1)
        assert back < 45, f"reconnected {back:.1f} s after sshd returned (the backoff said 60 s)"
        assert (await transport.run(["hostname"])).stdout.strip() == "solo"
    finally:
        await transport.close()


async def test_reconnects_soon_after_the_link_returns(make_testbed: MakeTestbed) -> None:
    bed = make_testbed(["solo"])
    transport = SSHTransport(_node(bed, "solo"), backoff=Backoff(initial=60.0, maximum=60.0, jitter=0.0))
    await transport.connect()
    try:
        bed.link_down("solo")
        await _wait_for(lambda: transport.state.phase is LinkPhase.RETRYING, 30, step=0.2)
        bed.link_up("solo")
        back = await _wait_for(lambda: transport.state.phase is LinkPhase.CONNECTED, 45, step=0.1)
        assert back < 45, f"reconnected {back:.1f} s after the link returned (the backoff said 60 s)"
    finally:
        bed.link_up("solo")
        await transport.close()


async def test_a_node_never_reached_fails_at_once_with_one_line(make_testbed: MakeTestbed) -> None:
    bed = make_testbed(["solo"])
    bed.kill_sshd("solo")
    transport = SSHTransport(_node(bed, "solo"))
    t0 = time.monotonic()
    await transport.connect()
    try:
        expected = f"solo ({bed.ip('solo')}:22): connection refused — is sshd running?"
        assert transport.unreachable_now() and transport.unreachable_message() == expected
        for attempt in (transport.run(["true"]), transport.wait_connected(timeout=60)):
            with pytest.raises(TransportError) as err:
                await attempt
            assert str(err.value) == expected
        assert time.monotonic() - t0 < 30
        # The supervisor keeps trying in the background: sshd back, the node is connected.
        bed.start_sshd("solo")
        await transport.wait_connected()
        assert not transport.unreachable_now()
    finally:
        await transport.close()


# -- host keys and authentication ------------------------------------------------------------------
def _foreign_known_hosts(bed: Testbed, tmp_path: Path, name: str) -> Path:
    key = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    key_type, key_b64 = Path(f"{key}.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"{bed.ip(name)} {key_type} {key_b64}\n")
    return known


async def test_host_key_mismatch_is_refused_and_said_plainly(testbed: Testbed, tmp_path: Path) -> None:
    known = _foreign_known_hosts(testbed, tmp_path, "spark2")
    transport = SSHTransport(_node(testbed, "spark2", known_hosts=str(known)))
    await transport.connect()
    try:
        state = transport.state
        assert state.phase is LinkPhase.FAILED
        assert "host key for spark2" in (state.last_error or "")
        assert "does not match known_hosts" in (state.last_error or "")
        assert str(known) in (state.last_error or "")
        with pytest.raises(TransportError, match="does not match known_hosts"):
            await transport.run(["hostname"])
    finally:
        await transport.close()


async def test_status_cli_reports_host_key_mismatch(testbed: Testbed, tmp_path: Path) -> None:
    known = _foreign_known_hosts(testbed, tmp_path, "spark2")
    config = testbed.write_config(tmp_path / "config.toml", nodes={"spark2": {"known_hosts": str(known)}})
    proc = run_sparktui("status", "--config", str(config), timeout=60)
    assert proc.returncode == 1
    assert "host key for spark2" in proc.stdout and "does not match known_hosts" in proc.stdout


async def test_unknown_host_is_refused(testbed: Testbed, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    transport = SSHTransport(_node(testbed, "spark1", known_hosts=str(empty)))
    await transport.connect()
    try:
        assert transport.state.phase is LinkPhase.FAILED
        assert "is not in known_hosts" in (transport.state.last_error or "")
    finally:
        await transport.close()


async def test_wrong_client_key_is_an_authentication_failure(testbed: Testbed, tmp_path: Path) -> None:
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    transport = SSHTransport(_node(testbed, "spark1", identity_file=str(key)))
    await transport.connect()
    try:
        assert transport.state.phase is LinkPhase.FAILED
        assert "authentication failed for root@" in (transport.state.last_error or "")
    finally:
        await transport.close()


async def test_ssh_config_alias_is_honoured(
    testbed: Testbed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host spark-alias\n  HostName {testbed.ip('spark2')}\n  User root\n"
        f"  IdentityFile {testbed.client_key}\n  UserKnownHostsFile {testbed.known_hosts}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    node = NodeConfig(name="spark2", host="spark-alias")
    transport = make_transport(node)
    await transport.connect()
    try:
        assert transport.state.phase is LinkPhase.CONNECTED, transport.state.describe()
        assert (await transport.run(["hostname"])).stdout.strip() == "spark2"
    finally:
        await transport.close()


async def test_local_node_uses_the_local_transport() -> None:
    transport: Transport = make_transport(NodeConfig(name="here", host="localhost", local=True))
    await transport.connect()
    assert (await transport.run(["printf", "%s", "x; y"])).stdout == "x; y"
    await transport.close()


async def _negotiated_cipher(node: NodeConfig) -> str:
    transport = make_transport(node)
    await transport.connect()
    try:
        assert isinstance(transport, SSHTransport) and transport.connection is not None
        return str(transport.connection.get_extra_info("send_cipher"))
    finally:
        await transport.close()


async def test_aes_gcm_is_offered_first_unless_the_ssh_config_names_ciphers(
    testbed: Testbed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AES-GCM is one OpenSSL call a packet in asyncssh; chacha20-poly1305 is three from Python."""
    assert await _negotiated_cipher(_node(testbed, "spark1")) == "aes256-gcm@openssh.com"
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n  Ciphers chacha20-poly1305@openssh.com\n")
    monkeypatch.setenv("HOME", str(home))
    assert await _negotiated_cipher(_node(testbed, "spark1")) == "chacha20-poly1305@openssh.com"
