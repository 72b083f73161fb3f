"""How a node is reached over SSH, before any connection: asyncssh's options from the node's config and
``~/.ssh/config``, the known_hosts files checked, the cipher order, the TCP target of the reachability
probe, and what a refused host key says. Pure functions of the node's settings (``SSHTransport`` uses
them at every attempt, so an edited ``~/.ssh/config`` or known_hosts counts at the next one)."""

from __future__ import annotations

import os

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from sparktui.config import NodeConfig

#: Default known_hosts files when ``~/.ssh/config`` names none (OpenSSH's defaults).
DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts")


def preferred_ciphers() -> list[str]:
    """asyncssh's ciphers with AES-GCM first, unless ``~/.ssh/config`` names its own (``Ciphers``).

    asyncssh offers chacha20-poly1305 first, as OpenSSH does. Both are sound; but asyncssh drives chacha20
    and poly1305 from Python, three calls a packet, where AES-GCM is one call to OpenSSL (AES instructions
    on x86-64 and on the Spark's Arm cores): 2.2 µs a 512-byte packet instead of 11.7 µs here. The dashboard
    moves a packet or more for every probe sample, scrape and log read, all day long."""
    # sorted() is stable: the rest keep asyncssh's order.
    names = [alg.decode() for alg in get_default_encryption_algs()]
    return sorted(names, key=lambda alg: not alg.endswith("-gcm@openssh.com"))


def connection_options(node: NodeConfig, *, keepalive_interval: float, keepalive_count_max: int,
                       connect_timeout: float) -> tuple[asyncssh.SSHClientConnectionOptions, list[str]]:
    """The options of one connection attempt, and the known_hosts files they check."""
    kwargs: dict[str, object] = {
        "keepalive_interval": keepalive_interval,
        "keepalive_count_max": keepalive_count_max,
        "connect_timeout": connect_timeout,
        "login_timeout": connect_timeout,
    }
    if node.user:
        kwargs["username"] = node.user
    if node.port:
        kwargs["port"] = node.port
    if node.identity_file:
        kwargs["client_keys"] = [os.path.expanduser(node.identity_file)]
    # config=() reads ~/.ssh/config for this host (HostName, User, Port, IdentityFile,
    # UserKnownHostsFile …).
    options = asyncssh.SSHClientConnectionOptions(host=node.host, config=(), **kwargs)
    known_files = known_hosts_files(node, options)
    # Never None (that would turn checking off); with no file at all nothing is trusted.
    known: list[str] | bytes = known_files or b""
    ciphers = {} if options.config.get("Ciphers") else {"encryption_algs": preferred_ciphers()}
    return asyncssh.SSHClientConnectionOptions(options, known_hosts=known, **ciphers), known_files


def known_hosts_files(node: NodeConfig,
                      options: asyncssh.SSHClientConnectionOptions | None = None) -> list[str]:
    """The known_hosts files checked for this node (existing ones only)."""
    if options is None:
        options = asyncssh.SSHClientConnectionOptions(host=node.host, config=())
    configured = options.known_hosts
    candidates: list[str] = []
    if node.known_hosts:
        candidates.append(node.known_hosts)
    if configured is None:
        pass  # "UserKnownHostsFile none": only the node's own file
    elif isinstance(configured, list | tuple) and configured:
        candidates += [str(c) for c in configured]
    else:
        candidates += DEFAULT_KNOWN_HOSTS
    files: list[str] = []
    for candidate in candidates:
        path = os.path.expanduser(candidate)
        if os.path.isfile(path) and os.access(path, os.R_OK) and path not in files:
            files.append(path)
    return files


def probe_target(node: NodeConfig) -> tuple[str, int] | None:
    """(host, port) of sshd as ``~/.ssh/config`` resolves it; ``None`` when a ProxyJump/ProxyCommand
    stands between (then only asyncssh can open the connection)."""
    port = {"port": node.port} if node.port else {}
    try:
        options = asyncssh.SSHClientConnectionOptions(host=node.host, config=(), **port)
    except (OSError, ValueError, asyncssh.Error):
        return None
    if options.tunnel or options.proxy_command:
        return None
    return str(options.host or node.host), int(options.port or 22)


def host_key_message(node: NodeConfig, known_files: list[str], options: asyncssh.SSHClientConnectionOptions,
                     detail: str) -> str:
    """Why the node's host key was refused: not matching a known one, or not known at all (``detail``:
    asyncssh's words)."""
    where = ", ".join(known_files) if known_files else "no known_hosts file"
    target = options.host or node.host
    shown = node.host if target == node.host else f"{node.host} = {target}"
    try:
        port = None if options.port in (None, 22) else options.port
        known = known_files and asyncssh.read_known_hosts(known_files).match(target, "", port)[0]
    except (OSError, ValueError, asyncssh.Error):
        known = []
    if known:
        return (f"host key for {node.name} ({shown}) does not match known_hosts ({where}): "
                f"the node may have been reinstalled, or someone is in the middle; refusing to connect")
    return (f"host key for {node.name} ({shown}) is not in known_hosts ({where}): "
            f"verify it and add it (e.g. ssh {target} once); refusing to connect ({detail})")
