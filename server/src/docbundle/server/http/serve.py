"""Serving ``HttpApp``: the listening socket, bound before uvicorn starts, the uvicorn server, and worker
processes sharing that socket (``docbundle serve --workers N``).

The app is handed in (``ServedApp``: what serving needs of ``app.HttpApp``), never imported: the app
imports ``metrics``, which reads this module's ``MULTIPROC_ENV``, so an import of ``app`` here would close
a circle (issue 33).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from docbundle.common.process import die_with_parent, exit_now

if TYPE_CHECKING:
    import uvicorn

    from .exchange import Receive, Scope, Send
    from .options import HttpOptions


class ServedApp(Protocol):
    """What serving needs of the app (``app.HttpApp``): its options, the hook a forked worker calls
    first, and the ASGI call."""

    @property
    def options(self) -> HttpOptions: ...

    def after_fork(self, worker: int) -> None: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


# How long requests in flight may run after SIGTERM or SIGINT before the server exits anyway.
SHUTDOWN_SECONDS = 10

log = logging.getLogger(__name__)
# Where prometheus-client's multiprocess mode keeps each process's values (``metrics``).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


# A file in the metrics folder on which every process that writes there holds a shared lock for its
# life. An exclusive lock on it is granted only once none of them is left: whoever gets one may remove
# the folder. So the folder goes with the last of the supervisor and its workers, also when the
# supervisor is SIGKILLed (its workers, told by the kernel, exit after it), and a folder whose
# processes were all SIGKILLed is swept by the next server that makes one (issue 31).
OWNERS_FILE = ".owners"
FOLDER_PREFIX = "docbundle-metrics-"
# This process's descriptors of the owners file (the supervisor's, or a worker's own).
_held: list[int] = []


def _hold(folder: str, *, create: bool = False) -> None:
    """Take this process's shared lock on ``folder``'s owners file (on a descriptor of its own).

    ``create`` (the supervisor, on its new folder): the file is made under another name and renamed
    once locked, so another server's sweep never finds it unlocked.
    """
    path = os.path.join(folder, OWNERS_FILE)
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path + ".new" if create else path, flags | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    if create:
        os.rename(path + ".new", path)
    _held.append(fd)


def _let_go() -> None:
    """Close this process's descriptors of the owners file (a forked worker's are its parent's)."""
    while _held:
        with contextlib.suppress(OSError):
            os.close(_held.pop())


def _remove_if_unowned(folder: str) -> bool:
    """Remove ``folder`` when no process holds its owners file; whether it did."""
    try:
        fd = os.open(os.path.join(folder, OWNERS_FILE), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # not a folder of this scheme, or not ours, or gone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a process still writes there
    finally:
        os.close(fd)
    shutil.rmtree(folder, ignore_errors=True)
    return True


def sweep_stale_folders(parent: str) -> list[str]:
    """Remove the metrics folders in ``parent`` that this user owns and no process holds any more."""
    removed = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            if not entry.name.startswith(FOLDER_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid == os.getuid() and _remove_if_unowned(entry.path):
                removed.append(entry.name)
    return removed


def worker_holds_metrics_folder() -> None:
    """In a forked worker: hold the metrics folder on a descriptor of its own, not the supervisor's."""
    folder = os.environ.get(MULTIPROC_ENV)
    _let_go()
    if folder:
        _hold(folder)


def worker_leaves_metrics_folder() -> None:
    """In a worker about to exit: let go, and remove the folder if the supervisor and the others did."""
    folder = os.environ.get(MULTIPROC_ENV)
    _let_go()
    if folder:
        _remove_if_unowned(folder)


@contextlib.contextmanager
def metrics_folder(workers: int) -> Iterator[None]:
    """With ``workers`` above 1, a private folder named by ``PROMETHEUS_MULTIPROC_DIR`` for the block,
    removed after it: the worker processes write their metrics there and a scrape adds them up. With
    one process, no such variable for the block (its metrics stay in memory). Folders left by servers
    that were all killed are swept first (``OWNERS_FILE``).

    Enter it before anything imports prometheus-client, which reads the variable when imported.
    """
    before = os.environ.pop(MULTIPROC_ENV, None)
    folder = None
    if workers > 1:
        for name in sweep_stale_folders(tempfile.gettempdir()):
            log.info("removed the metrics folder %s left by a server that was killed", name)
        folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
        _hold(folder, create=True)
        os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        if before is not None:
            os.environ[MULTIPROC_ENV] = before
        if folder is not None:
            _let_go()
            shutil.rmtree(folder, ignore_errors=True)


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


def http_server(app: ServedApp, *, log_level: str = "info") -> uvicorn.Server:
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


def run_http(app: ServedApp, sock: socket.socket, *, log_level: str = "info") -> int:
    """Serve ``app`` on ``sock`` until SIGTERM or SIGINT; the exit code (0, or 1 if a worker failed).

    With ``app.options.workers`` above 1, that many processes are forked after start-up, each running
    uvicorn on the same listening socket (the kernel spreads connections over them), while this
    process supervises them: SIGTERM or SIGINT is passed on to each (each drains its requests in
    flight), and a worker that exits by itself stops the others (a supervisor such as systemd restarts
    the whole server). Workers share the rate limits and key-check budgets (shared memory set up
    before the fork) and read the keys file each on its own, so a revocation reaches all of them.
    """
    workers = app.options.workers
    if workers <= 1:
        http_server(app, log_level=log_level).run(sockets=[sock])
        return 0
    children: dict[int, int] = {}
    for n in range(workers):
        pid = os.fork()
        if pid == 0:
            _worker(app, sock, n, log_level)  # never returns
        children[pid] = n
    return _supervise(children)


def _worker(app: ServedApp, sock: socket.socket, n: int, log_level: str) -> None:
    """A forked worker: serve until told to stop, then end the process (never return into the CLI)."""
    code = 1
    try:
        # Its own process group: a Ctrl-C in the terminal reaches the supervisor only, which passes
        # it on once (twice would cut the drain short). It dies with the supervisor (SIGTERM: it drains).
        os.setpgid(0, 0)
        die_with_parent(signal.SIGTERM)
        worker_holds_metrics_folder()
        app.after_fork(n)
        http_server(app, log_level=log_level).run(sockets=[sock])
        code = 0
    except KeyboardInterrupt:
        code = 0
    except BaseException:
        log.exception("worker %d failed", n)
    finally:
        with contextlib.suppress(OSError):
            worker_leaves_metrics_folder()
        exit_now(code)


def _supervise(children: dict[int, int]) -> int:
    """Wait for the workers; pass SIGTERM and SIGINT on as SIGTERM; 1 if one exited by itself."""
    stopping = False
    failed = False

    def stop(sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            log.warning("%s: stopping %d workers", signal.Signals(sig).name, len(children))
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            n = children.pop(pid, None)
            if n is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            if not stopping:
                log.error("worker %d (pid %d) exited with %d: stopping the others", n, pid, code)
                failed = True
                stop(signal.SIGTERM, None)
            elif code != 0:
                failed = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if failed else 0
