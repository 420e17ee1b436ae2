#!/usr/bin/env python3
"""How many NBD sessions a served guest holds at once (docs/hermit.md, "Sessions at once").

N clients connect together, each reads the NBD greeting and sends NBD_OPT_GO; the script counts
the greetings, the sessions in transmission (NBD_REP_ACK) and the refusals (an error reply,
e.g. over nbd_max_clients=). With `stopped`, QEMU is stopped through its QMP socket while the
clients connect and resumed after, so their connections reach the guest together.

    cargo xtask run --os hermit --profile nbd      # in another terminal
    scripts/nbd-sessions.py 100 running
    scripts/nbd-sessions.py 120 stopped target/images/nbd-qmp-PID.sock
"""
import json
import socket
import struct
import sys
import time

NBD = ("127.0.0.1", 40809)


def qmp(path, command):
    q = socket.socket(socket.AF_UNIX)
    q.connect(path)
    q.recv(4096)
    for name in ("qmp_capabilities", command):
        q.sendall(json.dumps({"execute": name}).encode())
        time.sleep(0.2)
        q.recv(4096)
    q.close()


def exactly(s, n):
    data = b""
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more:
            raise EOFError("the server closed the connection")
        data += more
    return data


def go(s):
    """True when the export is served, False when refused."""
    exactly(s, 18)
    payload = struct.pack(">I", 0) + struct.pack(">H", 0)
    s.sendall(struct.pack(">I", 3) + b"IHAVEOPT" + struct.pack(">II", 7, len(payload)) + payload)
    while True:
        _, _, reply, length = struct.unpack(">QIII", exactly(s, 20))
        exactly(s, length)
        if reply == 1:
            return True
        if reply & 0x80000000:
            return False


def main():
    n, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "stopped":
        qmp(sys.argv[3], "stop")
    clients = [socket.create_connection(NBD, timeout=30) for _ in range(n)]
    if mode == "stopped":
        time.sleep(1)
        qmp(sys.argv[3], "cont")
    served = refused = lost = 0
    for s in clients:
        try:
            if go(s):
                served += 1
            else:
                refused += 1
        except (OSError, EOFError):
            lost += 1
    print(f"{n} clients ({mode}): {served + refused} greeted and answered, {served} in "
          f"transmission, {refused} refused, {lost} without an answer")
    for s in clients:
        s.close()


if __name__ == "__main__":
    main()
