"""Nagle's algorithm off on a Streamlit 1.67 server's connections (optional, for replicas you run yourself:
PYTHONPATH=deploy/nodelay python -m streamlit run streamlit_app.py).

Why: asyncio turns TCP_NODELAY on for every TCP connection it serves, but only for sockets whose `proto` is
IPPROTO_TCP (asyncio.base_events._set_nodelay). Streamlit binds its listening socket as
`socket.socket(family=...)`, proto 0, and accepted sockets copy that proto, so its connections keep Nagle's
algorithm on: when a rerun's messages leave in more than one write, the later ones wait for the reader's
delayed ACK (~40 ms on Linux). Creating TCP sockets with proto IPPROTO_TCP lets asyncio do what it means to.
benchmarks/bench_load.py measures the difference.
"""

import socket

_init = socket.socket.__init__


def _init_tcp(self, family=-1, type=-1, proto=-1, fileno=None):
    if (
        fileno is None
        and proto in (-1, 0)
        and family in (socket.AF_INET, socket.AF_INET6)
        and type in (-1, socket.SOCK_STREAM)
    ):
        proto = socket.IPPROTO_TCP
    _init(self, family, type, proto, fileno)


socket.socket.__init__ = _init_tcp
