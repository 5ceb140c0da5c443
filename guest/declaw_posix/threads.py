"""Waiting, and pools of workers, in an interpreter that has one thread.

WASI's CPython is built without threads. Left as it is:
- `threading.Thread.start` raises `RuntimeError: can't start new thread`, so every
  `ThreadPoolExecutor`, `ProcessPoolExecutor` and `multiprocessing.Pool` failed at its first
  task (the last two with `NotImplementedError` about named semaphores and `os.pipe`);
- worse, its C lock, asked to wait for a held lock, traps the whole interpreter (exit 134, no
  message, the rest of the command line lost): `Event().wait(0.5)`, `Queue().get(timeout=1)`,
  `Condition.wait(1)`, `SimpleQueue().get(timeout=1)`, `Future.result(timeout=1)`.

Patched on import (guest/_declaw_boot.py `_install_import_patches`), each idempotent:
- **threading's locks** (`threading.Lock`, and the waiter locks of `Condition`, so `Event`,
  `Semaphore`, `Barrier`, `queue.Queue` and `Future` too) are `Lock` below: a free lock is taken;
  a held one, asked to wait with a timeout, waits the timeout out and says False, as on Linux,
  since nothing can release it meanwhile; asked to wait forever, it raises `RuntimeError` naming
  the deadlock, where Linux would hang until the command's timeout. `queue.SimpleQueue` is
  queue's own pure-Python one (the C one's timed `get` traps too).
- **Pools of workers run each task when it is given**, on the one thread, one after another
  (as asyncio's default executor does here: guest/_declaw_boot.py): `ThreadPoolExecutor`,
  `ProcessPoolExecutor`, `multiprocessing.Pool` and `multiprocessing.pool.ThreadPool`
  (`multiprocessing.dummy.Pool`). Results, exceptions, callbacks and the pools' own errors are
  CPython's; what differs is said in docs/guest.md: no parallelism, a process pool's task sees
  and changes the caller's globals (nothing is pickled), and a task that waits for a later one
  raises the deadlock error above.
- **`Thread.start`'s and `multiprocessing.Process.start`'s errors say why**, and what runs
  instead.

Nothing here crosses to the host: it is the guest's own code on its own thread.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

DEADLOCK = ("deadlock: this waits, without a timeout, for another thread to release a lock or "
            "give a value, and the sandbox runs one thread (WASI has none to start), so the "
            "wait would never end")
NO_PROCESSES = ("can't start new process: the sandbox has no processes of its own (WASI); "
                "multiprocessing's pools run their tasks in this one, one after another, and "
                "subprocess.Popen([sys.executable, ...]) runs a Python program beside it")
NO_THREADS = ("can't start new thread: the sandbox runs one thread (WASI has none to start); "
              "concurrent.futures' executors, multiprocessing's pools and asyncio.to_thread run "
              "their tasks on it, one after another")


class Lock:
    """`threading.Lock` in an interpreter with one thread (see the module's docstring)."""

    __slots__ = ("_held", "__weakref__")

    def __init__(self) -> None:
        self._held = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if blocking is not True or timeout != -1:
            _validate(blocking, timeout)
        if not self._held:
            self._held = True
            return True
        if not blocking:
            return False
        if timeout == -1:
            raise RuntimeError(DEADLOCK)
        if timeout > 0:
            time.sleep(timeout)  # looked up now: a `timeout` command's deadline replaces it
        return False

    def acquire_lock(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.acquire(blocking, timeout)

    def release(self) -> None:
        if not self._held:
            raise RuntimeError("release unlocked lock")
        self._held = False

    release_lock = release

    def locked(self) -> bool:
        return self._held

    locked_lock = locked

    def _at_fork_reinit(self) -> None:
        self._held = False

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{'locked' if self._held else 'unlocked'} _thread.lock object at {id(self):#x}>"

    def __reduce_ex__(self, protocol: object) -> Any:
        raise TypeError("cannot pickle '_thread.lock' object")  # nor copied: as CPython's


_probe: Any = None


def _validate(blocking: object, timeout: object) -> None:
    """The C lock's own checks and messages for `acquire`'s arguments: asked of a free C lock,
    which takes itself at once when they are good (and is given back)."""
    global _probe
    if _probe is None:
        import _thread

        _probe = _thread.allocate_lock()
    if _probe.acquire(blocking, timeout):
        _probe.release()


def _no_thread(*args: object, **kwargs: object) -> Any:
    raise RuntimeError(NO_THREADS)


def patch_threading(module: ModuleType) -> None:
    threading: Any = module
    if getattr(threading, "_declaw_one_thread", False):
        return
    threading._declaw_one_thread = True
    threading.Lock = Lock
    threading._allocate_lock = Lock
    if hasattr(threading, "_start_joinable_thread"):
        threading._start_joinable_thread = _no_thread


def patch_queue(module: ModuleType) -> None:
    queue: Any = module
    if hasattr(queue, "_PySimpleQueue"):
        queue.SimpleQueue = queue._PySimpleQueue


def _run(future: Any, call: Callable[[], Any]) -> None:
    """Run one task into its future, as a worker would: its exception goes to the future. Not
    an interruption of the caller's own thread, which a worker would not see: KeyboardInterrupt
    and a `timeout` command's deadline (guest/declaw_shell/deadlines.py) go on up."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = call()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if getattr(type(exc), "passes_through_programs", False):
            raise
        future.set_exception(exc)
    else:
        future.set_result(result)


def patch_thread_pool(module: ModuleType) -> None:
    """`ThreadPoolExecutor.submit` runs the task before it returns. Built on the executor's own
    worker context (3.14's `prepare_context`: its initializer, and `InterpreterPoolExecutor`'s
    tasks), so that the initializer runs once, before the first task, and a failing one breaks
    the pool as CPython's does."""
    thread: Any = module
    executor = thread.ThreadPoolExecutor
    if getattr(executor, "_declaw_one_thread", False) or not hasattr(executor, "prepare_context"):
        return
    base = thread._base

    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        with self._shutdown_lock, thread._global_shutdown_lock:
            if self._broken:
                raise self.BROKEN(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if thread._shutdown:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
        future = base.Future()
        context = self.__dict__.get("_declaw_context")
        if context is None:
            context = self._create_worker_context()
            try:
                context.initialize()
            except BaseException:
                base.LOGGER.critical("Exception in initializer:", exc_info=True)
                self._initializer_failed()
                future.set_exception(self.BROKEN(self._broken))
                return future
            self._declaw_context = context
        task = self._resolve_work_item_task(fn, args, kwargs)
        _run(future, lambda: context.run(task))
        return future

    submit.__doc__ = executor.submit.__doc__
    executor.submit = submit
    executor._declaw_one_thread = True


def patch_process_pool(module: ModuleType) -> None:
    process: Any = module
    if getattr(process.ProcessPoolExecutor, "_declaw_one_thread", False):
        return
    process.ProcessPoolExecutor = _process_pool_executor(process)


def _process_pool_executor(process: Any) -> type:
    base = process._base

    class ProcessPoolExecutor(base.Executor):  # type: ignore[name-defined]  # the module given
        """concurrent.futures' ProcessPoolExecutor, each task run when it is submitted, in this
        interpreter (WASI has no processes). The arguments are CPython's and checked as it does."""

        _declaw_one_thread = True

        def __init__(self, max_workers: int | None = None, mp_context: Any = None,
                     initializer: Callable[..., object] | None = None, initargs: tuple[Any, ...] = (), *,
                     max_tasks_per_child: int | None = None) -> None:
            if max_workers is not None and max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")
            if initializer is not None and not callable(initializer):
                raise TypeError("initializer must be a callable")
            if max_tasks_per_child is not None:
                if not isinstance(max_tasks_per_child, int):
                    raise TypeError("max_tasks_per_child must be an integer")
                if max_tasks_per_child <= 0:
                    raise ValueError("max_tasks_per_child must be >= 1")
            self._max_workers = max_workers or 1
            self._initializer, self._initargs = initializer, initargs
            self._initialized = False
            self._broken: str | bool = False
            self._shutdown_thread = False

        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            if self._broken:
                raise process.BrokenProcessPool(self._broken)
            if self._shutdown_thread:
                raise RuntimeError("cannot schedule new futures after shutdown")
            future = base.Future()
            if not self._initialized and self._initializer is not None:
                try:
                    self._initializer(*self._initargs)
                except BaseException:
                    base.LOGGER.critical("Exception in initializer:", exc_info=True)
                    self._broken = "A process initializer failed, the process pool is not usable anymore"
                    future.set_exception(process.BrokenProcessPool(self._broken))
                    return future
            self._initialized = True
            _run(future, lambda: fn(*args, **kwargs))
            return future

        submit.__doc__ = base.Executor.submit.__doc__

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            self._shutdown_thread = True

        def terminate_workers(self) -> None:
            self._shutdown_thread = True

        kill_workers = terminate_workers

    ProcessPoolExecutor.__module__ = process.__name__
    return ProcessPoolExecutor


def patch_multiprocessing_process(module: ModuleType) -> None:
    """`Process.start` says why it cannot (it failed on `os.WNOHANG`, deep in popen_fork)."""
    process: Any = module

    def start(self: Any) -> None:
        raise RuntimeError(NO_PROCESSES)

    process.BaseProcess.start = start


def patch_multiprocessing_pool(module: ModuleType) -> None:
    pool: Any = module
    if getattr(pool.Pool, "_declaw_one_thread", False):
        return
    for name in ("Pool", "ThreadPool"):
        setattr(pool, name, type(name, (OneThreadPool,), {"__module__": pool.__name__, "__qualname__": name}))
    for cls in (ApplyResult, IMapIterator):
        cls.__module__ = pool.__name__


RUN, CLOSE, TERMINATE = "RUN", "CLOSE", "TERMINATE"  # multiprocessing.pool's states


class OneThreadPool:
    """multiprocessing's `Pool` (and `ThreadPool`), each task run when it is given, in this
    interpreter: map, imap, imap_unordered, starmap, apply and their `_async` forms, whose
    results are ready when they return, callbacks included; close, terminate, join and `with`
    as CPython's, and its errors for a pool that no longer runs."""

    _declaw_one_thread = True

    def __init__(self, processes: int | None = None, initializer: Callable[..., object] | None = None,
                 initargs: Iterable[Any] = (), maxtasksperchild: int | None = None,
                 context: Any = None) -> None:
        if processes is not None and processes < 1:
            raise ValueError("Number of processes must be at least 1")
        if maxtasksperchild is not None and (type(maxtasksperchild) is not int or maxtasksperchild <= 0):
            raise ValueError("maxtasksperchild must be a positive int or None")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        self._processes = processes or 1
        self._state = RUN
        if initializer is not None:
            initializer(*initargs)

    def _check_running(self) -> None:
        if self._state != RUN:
            raise ValueError("Pool not running")

    def apply(self, func: Callable[..., Any], args: Iterable[Any] = (), kwds: dict[str, Any] | None = None) -> Any:
        return self.apply_async(func, args, kwds).get()

    def apply_async(self, func: Callable[..., Any], args: Iterable[Any] = (),
                    kwds: dict[str, Any] | None = None, callback: Callable[[Any], object] | None = None,
                    error_callback: Callable[[BaseException], object] | None = None) -> ApplyResult:
        self._check_running()
        return ApplyResult(lambda: func(*args, **(kwds or {})), callback, error_callback)

    def map(self, func: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int | None = None) -> list[Any]:
        return self.map_async(func, iterable, chunksize).get()

    def starmap(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                chunksize: int | None = None) -> list[Any]:
        return self.starmap_async(func, iterable, chunksize).get()

    def map_async(self, func: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int | None = None,
                  callback: Callable[[Any], object] | None = None,
                  error_callback: Callable[[BaseException], object] | None = None) -> ApplyResult:
        self._check_running()
        items = list(iterable)
        return ApplyResult(lambda: [func(item) for item in items], callback, error_callback)

    def starmap_async(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                      chunksize: int | None = None, callback: Callable[[Any], object] | None = None,
                      error_callback: Callable[[BaseException], object] | None = None) -> ApplyResult:
        self._check_running()
        items = list(iterable)
        return ApplyResult(lambda: [func(*item) for item in items], callback, error_callback)

    def imap(self, func: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int = 1) -> IMapIterator:
        self._check_running()
        if chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize:n}")
        return IMapIterator(func, iterable)

    imap_unordered = imap

    def close(self) -> None:
        if self._state == RUN:
            self._state = CLOSE

    def terminate(self) -> None:
        self._state = TERMINATE

    def join(self) -> None:
        if self._state == RUN:
            raise ValueError("Pool is still running")

    def __enter__(self) -> Any:
        self._check_running()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.terminate()

    def __reduce__(self) -> Any:
        raise NotImplementedError("pool objects cannot be passed between processes or pickled")

    def __repr__(self) -> str:
        cls = type(self)
        return f"<{cls.__module__}.{cls.__qualname__} state={self._state} pool_size={self._processes}>"


class ApplyResult:
    """An `AsyncResult` whose task has run: `get`, `wait`, `ready`, `successful`."""

    def __init__(self, call: Callable[[], Any], callback: Callable[[Any], object] | None,
                 error_callback: Callable[[BaseException], object] | None) -> None:
        self._error: BaseException | None = None
        self._value: Any = None
        try:
            self._value = call()
        except Exception as exc:  # what a worker sends back; anything else would end the worker
            self._error = exc
            if error_callback is not None:
                error_callback(exc)
        else:
            if callback is not None:
                callback(self._value)

    def ready(self) -> bool:
        return True

    def successful(self) -> bool:
        return self._error is None

    def wait(self, timeout: float | None = None) -> None:
        return None

    def get(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class IMapIterator:
    """`imap`'s iterator: each item's task runs when the item is asked for, and a task's
    exception is raised for its item only, as CPython's does."""

    def __init__(self, func: Callable[[Any], Any], iterable: Iterable[Any]) -> None:
        self._func, self._items = func, iter(iterable)

    def __iter__(self) -> IMapIterator:
        return self

    def __next__(self) -> Any:
        return self._func(next(self._items))

    def next(self, timeout: float | None = None) -> Any:
        return self.__next__()


# -- multiprocessing's shared objects -----------------------------------------------------------
# A sandbox has no processes: a pool's tasks run in this interpreter (OneThreadPool), so what
# multiprocessing shares between processes is shared already. Its top-level Queue, Lock, Event,
# Value, Array, Manager, Pipe... failed (no _multiprocessing, no os.pipe, no ctypes), so the
# programs that pass one to a pool's tasks (`Manager().dict()`, `Value("i", 0)` with
# `get_lock()`) could not run: here they are multiprocessing.dummy's (threading's, whose locks
# are Lock above), with the methods of multiprocessing's own that dummy's lack.

def _queue_class(base: type) -> type:
    class Queue(base):
        """multiprocessing.Queue: a queue of this interpreter (close and join_thread do nothing)."""

        def close(self) -> None:
            pass

        def join_thread(self) -> None:
            pass

        def cancel_join_thread(self) -> None:
            pass

    return Queue


def _zero(typecode: Any) -> Any:
    """A shared value's starting value: 0.0 for the float type codes, b"\\0" for "c", else 0."""
    return 0.0 if typecode in ("f", "d") else b"\0" if typecode == "c" else 0


class SharedValue:
    """multiprocessing.Value: `.value` and `get_lock()` (a lock of this interpreter's)."""

    def __init__(self, typecode_or_type: Any, *args: Any, lock: Any = True) -> None:
        import threading

        self._typecode_or_type = typecode_or_type
        self.value = args[0] if args else _zero(typecode_or_type)
        self._lock = lock if lock not in (True, False, None) else threading.RLock()

    def get_lock(self) -> Any:
        return self._lock

    def get_obj(self) -> Any:
        return self

    def __repr__(self) -> str:
        return "<Synchronized wrapper for %r>" % (self.value,)


class SharedArray(list):
    """multiprocessing.Array: a list of the values (or zeros for a size), with `get_lock()`."""

    def __init__(self, typecode_or_type: Any, size_or_initializer: Any, *, lock: Any = True) -> None:
        import threading

        values = [_zero(typecode_or_type)] * size_or_initializer if isinstance(size_or_initializer, int) \
            else list(size_or_initializer)
        super().__init__(values)
        self._lock = lock if lock not in (True, False, None) else threading.RLock()

    def get_lock(self) -> Any:
        return self._lock

    def get_obj(self) -> Any:
        return self


class Manager:
    """multiprocessing.Manager(): its dict, list, Namespace, Queue, Lock, Value... are this
    interpreter's own objects; `with`, start and shutdown as a manager's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import multiprocessing.dummy as dummy

        self._dummy = dummy

    def __getattr__(self, name: str) -> Any:
        made = {"dict": dict, "list": list, "Value": SharedValue, "Array": SharedArray,
                "Queue": _queue_class(_std_queue()), "JoinableQueue": _queue_class(_std_queue())}.get(name)
        return made if made is not None else getattr(self._dummy, name)

    def start(self, *args: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def connect(self) -> None:
        pass

    def __enter__(self) -> "Manager":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _std_queue() -> type:
    import queue

    return queue.Queue


def patch_multiprocessing_context(module: ModuleType) -> None:
    """multiprocessing's contexts (the top-level names are the default one's methods) make the
    objects above."""
    context: Any = module
    base = context.BaseContext
    if getattr(base, "_declaw_shared", False):
        return

    def made_by(factory: Callable[..., Any]) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            kwargs.pop("ctx", None)
            return factory(*args, **kwargs)
        method.__name__ = getattr(factory, "__name__", "factory")
        return method

    def dummy(name: str) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            import multiprocessing.dummy as dummy_module

            return getattr(dummy_module, name)(*args, **kwargs)
        make.__name__ = name
        return make

    def queue(*args: Any, **kwargs: Any) -> Any:
        return _queue_class(_std_queue())(*args, **kwargs)

    def simple_queue() -> Any:
        import queue as queue_module

        return _queue_class(queue_module.SimpleQueue)()

    factories: dict[str, Callable[..., Any]] = {
        **{name: dummy(name) for name in ("Lock", "RLock", "Semaphore", "BoundedSemaphore", "Condition", "Event",
                                          "Barrier", "Pipe")},
        "Queue": queue, "JoinableQueue": queue, "SimpleQueue": simple_queue, "Value": SharedValue,
        "RawValue": SharedValue, "Array": SharedArray, "RawArray": SharedArray, "Manager": Manager}
    for name, factory in factories.items():
        setattr(base, name, made_by(factory))
    base._declaw_shared = True
    import sys

    package = sys.modules.get("multiprocessing")  # its top-level names, bound at its import
    default = getattr(context, "_default_context", None)
    if package is not None and default is not None:
        for name in factories:
            if hasattr(package, name):
                setattr(package, name, getattr(default, name))
