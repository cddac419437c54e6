#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# relay.py PORTFILE UPSTREAM CAPTURE: a tcp relay for tests/e2e/memory-tls.sh.
# Listens on a free loopback port (written to PORTFILE), relays every
# connection to UPSTREAM (host:port) both ways, and appends what passes
# (the first 256 MiB) to CAPTURE: what an eavesdropper on the link sees.
import socket
import sys
import threading

LIMIT = 256 << 20
lock = threading.Lock()
captured = 0


def pump(src, dst, cap):
    global captured
    try:
        while True:
            data = src.recv(1 << 20)
            if not data:
                break
            with lock:
                if captured < LIMIT:
                    cap.write(data[:LIMIT - captured])
                    captured += len(data)
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    portfile, upstream, capture = sys.argv[1:4]
    host, port = upstream.rsplit(":", 1)
    cap = open(capture, "ab", buffering=0)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    import os
    os.rename(portfile + ".tmp", portfile)
    while True:
        c, _ = ls.accept()
        try:
            u = socket.create_connection((host, int(port)))
        except OSError:
            c.close()
            continue
        for a, b in ((c, u), (u, c)):
            threading.Thread(target=pump, args=(a, b, cap),
                             daemon=True).start()


main()
