#!/usr/bin/env python3
# fake-peer.py - stand-ins for famd peers in end-to-end attacks.
#
#   fake-peer.py rogue PORTFILE CAPTURE
#       A rogue memory node: listens on 127.0.0.1 (port written to
#       PORTFILE), takes one connection, answers its HELLO with a challenge
#       and its AUTH with a proof it cannot know, and writes every byte the
#       client sent to CAPTURE (until the client closes, or 10 s).
#   fake-peer.py silent HOST:PORT N SECONDS
#       Opens N connections that say nothing, holds them SECONDS, then
#       closes them; prints "open N" once they are all open.
#   fake-peer.py corrupt PORTFILE UPSTREAM FLAGFILE COUNTFILE
#       A proxy (port in PORTFILE) to UPSTREAM that, while FLAGFILE exists,
#       flips one bit in the data of every successful READ response going
#       back to the client; COUNTFILE holds the count of such flips.
# Frames are parsed with the header of the version they carry (1: 24
# bytes, 2 and later: 32), so the same proxy stands before older famds.
import os
import resource
import select
import socket
import struct
import sys
import threading
import time

MAGIC = 0x46414D44


def hdr_len(version):
    return 24 if version == 1 else 32


def recv_frame(s):
    """Reads one frame; returns (header bytes, payload) or None at EOF."""
    head = b""
    while len(head) < 8:
        b = s.recv(8 - len(head))
        if not b:
            return None
        head += b
    need = hdr_len(head[4])
    while len(head) < need:
        b = s.recv(need - len(head))
        if not b:
            return None
        head += b
    length = struct.unpack(">I", head[8:12])[0]
    body = b""
    while len(body) < length:
        b = s.recv(length - len(body))
        if not b:
            return None
        body += b
    return head, body


def frame(version, typ, flags, status, rid, payload):
    h = struct.pack(">IBBHIiQ", MAGIC, version, typ, flags, len(payload),
                    status, rid)
    if version != 1:
        h += struct.pack(">II", 0, 0)
    return h + payload


def rogue(portfile, capture):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    c, _ = ls.accept()
    c.settimeout(10)
    got = b""
    try:
        while True:
            fr = recv_frame(c)
            if fr is None:
                break
            head, body = fr
            got += head + body
            version, typ, rid = head[4], head[5], struct.unpack(">Q", head[16:24])[0]
            if typ == 1:    # HELLO: a challenge (role memory, nonce, name)
                ch = bytes([3, 0, 0, 0]) + os.urandom(32) + b"rogue".ljust(64, b"\0")
                c.sendall(frame(version, 1, 1, 0, rid, ch))
            elif typ == 10:  # AUTH: a proof made up, and a session
                resp = bytes([3, 0, 0, 0]) + struct.pack(">IQQ", 0, 1, 2) + b"rogue".ljust(64, b"\0")
                c.sendall(frame(version, 10, 1, 0, rid, os.urandom(32) + resp))
    except (socket.timeout, ConnectionError):
        pass
    with open(capture, "wb") as f:
        f.write(got)


def silent(addr, n, seconds):
    host, port = addr.rsplit(":", 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.connect((host, int(port)))
        socks.append(s)
    print("open", len(socks), flush=True)
    time.sleep(seconds)
    for s in socks:
        s.close()


def corrupt(portfile, upstream, flagfile, countfile):
    host, port = upstream.rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    lock = threading.Lock()
    flips = [0]

    def up(c, u):  # client to the memory node, as it is
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                u.sendall(b)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(c, u):  # the memory node's frames, READ data flipped
        try:
            while True:
                fr = recv_frame(u)
                if fr is None:
                    break
                head, body = fr
                typ, flags = head[5], struct.unpack(">H", head[6:8])[0]
                status = struct.unpack(">i", head[12:16])[0]
                if (typ == 4 and flags & 1 and status == 0 and body and
                        os.path.exists(flagfile)):
                    body = bytearray(body)
                    body[len(body) // 2] ^= 0x10
                    body = bytes(body)
                    with lock:
                        flips[0] += 1
                        with open(countfile, "w") as f:
                            f.write(str(flips[0]))
                c.sendall(head + body)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    while True:
        c, _ = ls.accept()
        u = socket.create_connection((host, int(port)))
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=up, args=(c, u), daemon=True).start()
        threading.Thread(target=down, args=(c, u), daemon=True).start()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "rogue":
        rogue(sys.argv[2], sys.argv[3])
    elif mode == "silent":
        silent(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "corrupt":
        corrupt(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit("fake-peer.py: unknown mode " + mode)
