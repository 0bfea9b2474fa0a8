"""Serving ``HttpApp``: the listening socket, bound before uvicorn starts, and the uvicorn server."""

from __future__ import annotations

import logging
import signal
import socket
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

    from .app import HttpApp


# How long requests in flight may run after SIGTERM or SIGINT before the server exits anyway.
SHUTDOWN_SECONDS = 10

log = logging.getLogger("docbundle.http")


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one), before uvicorn starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they are TCP,
    # and accepted sockets inherit this. With Nagle on, a response written as headers then body waits
    # for the client's delayed ACK: +40 ms on every request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def http_server(app: HttpApp, *, log_level: str = "info") -> uvicorn.Server:
    """A uvicorn server for ``app``; run it with ``.run(sockets=[bind_socket(...)])``.

    On SIGTERM or SIGINT it stops accepting connections, lets the requests in flight finish (up to
    ``SHUTDOWN_SECONDS``; a second signal cuts that short) and returns: exit code 0 for a supervisor's
    stop (uvicorn would raise SIGTERM again after its graceful shutdown, and the process would end
    killed by it).
    """
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if sig != signal.SIGTERM:
                super().handle_exit(sig, frame)
                return
            if self.should_exit:
                self.force_exit = True  # a second SIGTERM: stop waiting for requests in flight
            else:
                log.warning("SIGTERM: finishing the requests in flight, then exiting")
            self.should_exit = True

    trusted = list(app.options.trusted_proxies)
    config = uvicorn.Config(
        app,
        # Explicit, so neither uvicorn's default (trust 127.0.0.1) nor $FORWARDED_ALLOW_IPS applies:
        # X-Forwarded-For is believed from the --trusted-proxy peers only, else from nobody.
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted,
        log_level=log_level,
        access_log=False,  # HttpApp writes the access log, with more in it
        lifespan="on",
        log_config=None,  # the JSON logging configured by the CLI stays in charge
        server_header=False,
        # A stuck client must not hold shutdown (systemctl stop, docker stop) for ever.
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
    )
    return Server(config)
