"""Loopback-to-namespace TCP forwarder for the GPUStack test server.

`gpustack start` binds 0.0.0.0 and has no host flag, so it runs inside a network namespace that only has
`lo` (shared/research/gpustack.md §5.2). Tests and developers run in the host namespace. This forwarder
bridges the two without opening anything beyond loopback:

  python3 forward.py --listen 127.0.0.1:PORT --netns NS --target 127.0.0.1:30080 [--pid-file F]

creates the listening socket on the *host* loopback, then re-executes itself through
`ip netns exec NS` with that socket inherited (a socket keeps the namespace it was created in), and the
child connects to the target inside the namespace. The listener is never visible outside 127.0.0.1.
Prints the bound port on stdout when ready (PORT 0 = any free port).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def _serve(fd: int, host: str, port: int) -> None:
    sock = socket.socket(fileno=fd)

    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(host, port)
        except OSError:
            cw.close()
            return
        await asyncio.gather(_pipe(cr, uw), _pipe(ur, cw))

    server = await asyncio.start_server(handle, sock=sock)
    async with server:
        await server.serve_forever()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--netns")
    ap.add_argument("--target", required=True)
    ap.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pid-file")
    a = ap.parse_args()
    thost, tport = a.target.rsplit(":", 1)
    if a.fd is not None:   # child, inside the namespace
        asyncio.run(_serve(a.fd, thost, int(tport)))
        return 0
    lhost, lport = a.listen.rsplit(":", 1)
    if not lhost.startswith("127."):
        print("forward.py: refusing to listen outside 127.0.0.0/8", file=sys.stderr)
        return 2
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((lhost, int(lport)))
    ls.listen(64)
    port = ls.getsockname()[1]
    fd = ls.fileno()
    os.set_inheritable(fd, True)
    cmd = [sys.executable, os.path.abspath(__file__), "--fd", str(fd), "--target", a.target]
    if a.netns:
        cmd = ["ip", "netns", "exec", a.netns, *cmd]
    child = subprocess.Popen(cmd, pass_fds=[fd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             start_new_session=True)
    ls.close()
    if a.pid_file:
        with open(a.pid_file, "w") as fh:
            fh.write(f"{child.pid}\n")
    print(port, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
