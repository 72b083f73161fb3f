"""Ray's node table straight from the GCS's gRPC API, in the standard library: ``ray.nodes()``'s own call
(``NodeInfoGcsService/GetAllNodeInfo``) and the cluster metadata ``ray start --head`` always writes (the
Ray version), over one plain HTTP/2 connection — no ``import ray`` (0.6–2 s of CPU on a loaded node).

Only what a unary call needs: the connection preface and SETTINGS (acknowledged), HEADERS as HPACK
literals (no Huffman, no table), one DATA frame per request, flow-control windows opened wide up front,
and the reply's DATA read until its stream ends; the protobuf wire format decoded by field number (stable
across Ray 2.9 … 2.60: protobuf keeps numbers). Anything unexpected — a refused stream, a GOAWAY, an
empty or compressed reply, token auth — raises ``GrpcError`` and the caller asks Ray the usual way.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, PADDED, ACK = 0x1, 0x4, 0x8, 0x1
#: Field numbers (``src/ray/protobuf/gcs.proto``, ``gcs_service.proto``).
NODE_LIST = 2                                   # GetAllNodeInfoReply.node_info_list
NODE_ID, ADDRESS, STATE, HOSTNAME, RESOURCES = 1, 2, 7, 8, 11   # GcsNodeInfo
KV_VALUE = 2                                    # InternalKVGetReply.value
WINDOW = 1 << 24


class GrpcError(Exception):
    pass


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _hpack_int(value: int) -> bytes:
    """An HPACK integer with a 7-bit prefix (the first byte's top bit: no Huffman)."""
    if value < 127:
        return bytes([value])
    out, value = bytearray([127]), value - 127
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _headers(fields: list[tuple[str, str]]) -> bytes:
    out = bytearray()
    for name, value in fields:  # literal header field without indexing, new name
        out += b"\x00" + _hpack_int(len(name)) + name.encode() + _hpack_int(len(value)) + value.encode()
    return bytes(out)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(data):
            raise GrpcError("protobuf: varint cut short")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def fields(data: bytes) -> list[tuple[int, Any]]:
    """A protobuf message as (field number, value): varints as int, fixed64 as the 8 bytes, fixed32 as
    the 4 bytes, length-delimited as bytes."""
    out: list[tuple[int, Any]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise GrpcError(f"protobuf: wire type {wire}")
        out.append((number, value))
    if i != len(data):
        raise GrpcError("protobuf: message cut short")
    return out


def _bytes_field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field (``number`` < 16)."""
    return bytes([number << 3 | 2]) + _pb_varint(len(value)) + value


def _pb_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        if value < 0x80:
            out.append(value)
            return bytes(out)
        out.append(value & 0x7F | 0x80)
        value >>= 7


class Channel:
    """One HTTP/2 connection to ``host:port`` for unary gRPC calls, one after another."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.authority = f"{host}:{port}"
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.deadline = time.monotonic() + timeout
        self.stream = 1
        self.buf = b""
        # Our SETTINGS: a wide initial stream window (id 4); the connection's window widened as well.
        self.sock.sendall(PREFACE + _frame(SETTINGS, 0, 0, struct.pack(">HI", 4, WINDOW))
                          + _frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", WINDOW)))

    def close(self) -> None:
        self.sock.close()

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.sock.settimeout(max(0.01, self.deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise GrpcError("the GCS closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def call(self, method: str, request: bytes) -> bytes:
        """The reply message of one unary call of ``method`` ("/package.Service/Method")."""
        stream = self.stream
        self.stream += 2
        head = _headers([(":method", "POST"), (":scheme", "http"), (":path", method),
                         (":authority", self.authority), ("content-type", "application/grpc"),
                         ("te", "trailers")])
        body = b"\x00" + struct.pack(">I", len(request)) + request
        self.sock.sendall(_frame(HEADERS, END_HEADERS, stream, head) + _frame(DATA, END_STREAM, stream, body))
        data = bytearray()
        while True:
            header = self._read(9)
            size = int.from_bytes(header[:3], "big")
            kind, flags = header[3], header[4]
            sid = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
            payload = self._read(size)
            if kind == SETTINGS and not flags & ACK:
                self.sock.sendall(_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                self.sock.sendall(_frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                raise GrpcError("the GCS sent GOAWAY")
            elif kind == RST_STREAM and sid == stream:
                raise GrpcError("the GCS reset the call")
            elif kind == DATA and sid == stream:
                if flags & PADDED and payload:  # the pad length, the data, the padding
                    payload = payload[1:len(payload) - payload[0]]
                data += payload
            if sid == stream and kind in (DATA, HEADERS) and flags & END_STREAM:
                break
        if len(data) < 5 or data[0] != 0:
            raise GrpcError("no reply (a gRPC error status, or a compressed reply)")
        size = int.from_bytes(data[1:5], "big")
        if len(data) < 5 + size:
            raise GrpcError("reply cut short")
        return bytes(data[5:5 + size])


def _node(info: bytes) -> dict[str, Any]:
    node: dict[str, Any] = {"node_id": None, "ip": None, "hostname": None, "alive": True, "gpu": 0.0,
                            "is_head": False}
    resources: dict[str, float] = {}
    for number, value in fields(info):
        if number == NODE_ID:
            node["node_id"] = value.hex()
        elif number == ADDRESS:
            node["ip"] = value.decode("utf-8", "replace")
        elif number == HOSTNAME:
            node["hostname"] = value.decode("utf-8", "replace")
        elif number == STATE:
            node["alive"] = value == 0  # GcsNodeState ALIVE = 0 (proto3 leaves a 0 out: alive by default)
        elif number == RESOURCES:
            entry = dict(fields(value))
            if isinstance(entry.get(2), bytes) and len(entry[2]) == 8:
                resources[entry.get(1, b"").decode("utf-8", "replace")] = struct.unpack("<d", entry[2])[0]
    node["gpu"] = float(resources.get("GPU", 0.0))
    node["is_head"] = "node:__internal_head__" in resources
    return node


def node_list(channel: Channel) -> list[dict[str, Any]]:
    """Every node the GCS knows (``ray.nodes()``'s call), each as ``_node`` reads it."""
    reply = channel.call("/ray.rpc.NodeInfoGcsService/GetAllNodeInfo", b"")
    return [_node(value) for number, value in fields(reply) if number == NODE_LIST]


def grpc_reading(host: str, port: int, timeout: float) -> dict[str, Any]:
    """The ``RAYPROBE`` document of ``sparktui/node/ray_probe.py`` (the same keys and meaning), read from
    the GCS at ``host:port``. Raises ``GrpcError`` or ``OSError``."""
    channel = Channel(host, port, timeout)
    try:
        nodes = node_list(channel)
        meta = channel.call("/ray.rpc.InternalKVGcsService/InternalKVGet",
                            _bytes_field(1, b"CLUSTER_METADATA") + _bytes_field(2, b"cluster"))
    finally:
        channel.close()
    value = dict(fields(meta)).get(KV_VALUE)
    try:
        version = json.loads(value)["ray_version"] if isinstance(value, bytes) else None
    except (ValueError, KeyError, TypeError):
        version = None
    if not nodes or not version:
        raise GrpcError("no nodes, or no Ray version, in the GCS's answer")
    return {"ray_version": str(version), "t": time.time(), "nodes": nodes,
            "gpu_total": sum(n["gpu"] for n in nodes if n["alive"]), "via": "grpc"}


def head_node_wait(host: str, port: int, t0: float, limit: float, poll: float) -> str:
    """Poll the GCS's node table on one connection until it lists the head's node alive, at most until
    ``limit`` s after ``t0`` (``time.monotonic``): what to say of it ("head node registered after N s", or
    why it was not read or not seen). It never raises: a reader that cannot tell only costs the wait."""
    try:
        channel = Channel(host, port, max(1.0, limit - (time.monotonic() - t0)))
    except OSError as exc:
        return f"head node not read: {exc}"
    try:
        while not any(n["is_head"] and n["alive"] for n in node_list(channel)):
            if time.monotonic() - t0 > limit:
                return f"the head's node not in the gcs within {limit:.0f} s"
            time.sleep(poll)
    except (GrpcError, OSError) as exc:
        return f"head node not read: {exc}"
    finally:
        channel.close()
    return f"head node registered after {time.monotonic() - t0:.2f} s"
