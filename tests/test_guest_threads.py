"""One thread in the guest (guest/declaw_posix/threads.py): waits with a timeout time out, pools
of workers run their tasks inline, and what cannot be done says so.

Each program of the table runs natively (this machine's CPython, threads and processes real) and
as `python3` in a sandbox, and the two outputs are compared. Before: every pool failed at its
first task, and any wait for a held lock (`Event().wait(0.1)`, `Queue.get(timeout=1)`) stopped
the whole command line with exit 134 and no message."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

WAITS = '''
import concurrent.futures as cf, copy, pickle, queue, threading, time

def took(fn, *args, **kwargs):
    start = time.monotonic()
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:
        value = type(exc).__name__
    return value, 0.04 <= time.monotonic() - start < 2

print("event", took(threading.Event().wait, 0.05))
condition = threading.Condition()
with condition:
    print("condition", took(condition.wait, 0.05), took(condition.wait_for, lambda: False, 0.05))
print("queue", took(queue.Queue().get, timeout=0.05), took(queue.Queue(1).get, True, 0.05))
full = queue.Queue(1)
full.put(1)
print("full queue", took(full.put, 2, timeout=0.05), full.get_nowait())
print("simple queue", took(queue.SimpleQueue().get, timeout=0.05))
lock = threading.Lock()
print("lock", lock.acquire(), lock.locked(), lock.acquire(False), took(lock.acquire, timeout=0.05))
lock.release()
print("released", lock.locked(), repr(lock).split()[0])
with lock:
    print("with", lock.locked())
for args in [dict(blocking=False, timeout=1), dict(timeout=-2), dict(timeout="x")]:
    try:
        threading.Lock().acquire(**args)
    except (ValueError, TypeError) as exc:
        print("bad", type(exc).__name__)
try:
    threading.Lock().release()
except RuntimeError as exc:
    print(exc)
for copier in (pickle.dumps, copy.copy, copy.deepcopy):
    try:
        copier(threading.Lock())
    except TypeError as exc:
        print("copy", exc)
print("semaphore", took(threading.Semaphore(0).acquire, timeout=0.05), threading.BoundedSemaphore(2).acquire())
print("barrier of one", threading.Barrier(1).wait())
print("future", took(cf.Future().result, timeout=0.05))
print("rlock", threading.RLock().acquire(), threading.RLock().acquire(timeout=0.05))
'''

THREAD_POOL = '''
import asyncio, concurrent.futures as cf

def square(x):
    return x * x

def fail(x):
    raise ValueError(f"bad {x}")

calls = []
with cf.ThreadPoolExecutor(max_workers=1, initializer=calls.append, initargs=("init",)) as pool:
    print(list(pool.map(square, range(6))), list(pool.map(pow, [2, 3], [5, 2])))
    futures = [pool.submit(square, n) for n in range(4)]
    print(sorted(f.result() for f in cf.as_completed(futures)))
    done, pending = cf.wait(futures, timeout=5)
    print(len(done), len(pending), all(f.done() for f in futures))
    failed = pool.submit(fail, 7)
    print(repr(failed.exception()), failed.done(), failed.cancelled())
    try:
        list(pool.map(fail, [1]))
    except ValueError as exc:
        print("map raised", exc)
    print(pool.submit(lambda: cf.ThreadPoolExecutor().submit(square, 9).result()).result())
    print("kwargs", pool.submit(dict, a=1).result())
print(calls)
try:
    pool.submit(square, 1)
except RuntimeError as exc:
    print(exc)

def broken_initializer():
    raise OSError("no init")

import logging
logging.disable(logging.CRITICAL)  # CPython logs the initializer's traceback: both do
pool = cf.ThreadPoolExecutor(max_workers=1, initializer=broken_initializer)
print(type(pool.submit(square, 2).exception()).__name__)
try:
    pool.submit(square, 3)
except cf.BrokenExecutor as exc:
    print("broken", type(exc).__name__)
try:
    cf.ThreadPoolExecutor(max_workers=0)
except ValueError as exc:
    print(exc)

async def main():
    loop = asyncio.get_running_loop()
    with cf.ThreadPoolExecutor() as own:
        first = await loop.run_in_executor(own, square, 12)
    return first, await asyncio.to_thread(square, 13)

print(asyncio.run(main()))
'''

PROCESS_POOLS = '''
import concurrent.futures as cf, multiprocessing
from multiprocessing.dummy import Pool as DummyPool

def square(x):
    return x * x

def fail(x):
    raise KeyError(x)

def inverse(x):
    return 1 // x

if __name__ == "__main__":
    with cf.ProcessPoolExecutor(max_workers=2) as pool:
        print(list(pool.map(square, range(6), chunksize=2)))
        print(sorted(f.result() for f in cf.as_completed([pool.submit(square, n) for n in (3, 4)])))
        print(repr(pool.submit(fail, 5).exception()))
    try:
        pool.submit(square, 1)
    except RuntimeError as exc:
        print(exc)
    for bad in (dict(max_workers=0), dict(max_tasks_per_child=0)):
        try:
            cf.ProcessPoolExecutor(**bad)
        except ValueError as exc:
            print(type(exc).__name__)
    seen = []
    with multiprocessing.Pool(4) as pool:
        print(pool.map(square, range(5)), pool.starmap(pow, [(2, 3), (3, 2)]))
        print(list(pool.imap(square, range(3))), sorted(pool.imap_unordered(square, range(3), chunksize=2)))
        print(pool.apply(square, (6,)), pool.apply_async(square, (7,), callback=seen.append).get(timeout=5))
        result = pool.map_async(square, [8, 9], callback=seen.append)
        result.wait()
        print(result.ready(), result.successful(), result.get())
        failing = pool.apply_async(fail, (1,), error_callback=lambda exc: seen.append(repr(exc)))
        failing.wait(5)
        print(failing.ready(), failing.successful())
        try:
            failing.get()
        except KeyError as exc:
            print("get raised", repr(exc))
        items = pool.imap(inverse, [1, 0, 2])
        print(next(items), end=" ")
        try:
            next(items)
        except ZeroDivisionError:
            print("raised for its item", end=" ")
        print(next(items), list(pool.imap(square, [])))
    print(seen)
    pool = multiprocessing.Pool(2)
    try:
        pool.join()
    except ValueError as exc:
        print(exc)
    pool.close()
    try:
        pool.map(square, [1])
    except ValueError as exc:
        print(exc)
    pool.join()
    try:
        multiprocessing.Pool(0)
    except ValueError as exc:
        print(exc)
    with DummyPool(3) as pool:
        print(pool.map(square, [1, 2, 3]), pool.apply_async(divmod, (7, 2)).get())
'''

SHARED = '''
# multiprocessing's shared objects beside a pool (they failed: no _multiprocessing, os.pipe or ctypes)
import multiprocessing as mp
from multiprocessing import Manager, Pool, Value

counter = None


def init(shared):
    global counter
    counter = shared


def work(args):
    table, i = args
    with counter.get_lock():
        counter.value += i
    table[i] = i * i
    return i


if __name__ == "__main__":
    with Manager() as manager:
        table = manager.dict()
        total = Value("i", 0)
        with Pool(2, initializer=init, initargs=(total,)) as pool:
            print(sorted(pool.map(work, [(table, i) for i in range(5)])))
        print(dict(sorted(table.items())), total.value)
        items = manager.list([1, 2]); items.append(3); print(list(items))
        ns = manager.Namespace(); ns.x = 5; print(ns.x)
        mq = manager.Queue(); mq.put("m"); print(mq.get())
    q = mp.Queue(); q.put(1); q.put("a"); print(q.get(), q.get(), q.get(timeout=0.05) if False else "")
    q.close(); q.join_thread()
    with mp.Lock():
        print("locked")
    with mp.RLock():
        print("rlocked")
    e = mp.Event(); e.set(); print(e.is_set(), e.wait(0.01))
    print(mp.Semaphore(2).acquire(), mp.Value("d").value, mp.Value("i", 7).value)
    a = mp.Array("d", 3); a[0] = 1.5; print(list(a), len(a))
    b = mp.Array("i", [1, 2, 3]); print(b[:], sum(b))
    parent, child = mp.Pipe(); parent.send({"k": 1}); print(child.recv(), child.poll())
    jq = mp.JoinableQueue(); jq.put(1); jq.get(); jq.task_done(); jq.join(); print("joined")
    sq = mp.SimpleQueue(); sq.put(2); print(sq.get(), sq.empty())
    print(mp.get_context("spawn").Queue().empty())
'''

PROGRAMS = {"waits": WAITS, "thread pools": THREAD_POOL, "process pools": PROCESS_POOLS, "shared objects": SHARED}


def _native(source: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "program.py"
    script.write_text(source)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_as_cpython_with_threads_says(fresh: Sandbox, tmp_path: Path, name: str) -> None:
    native = _native(PROGRAMS[name], tmp_path)
    assert native.returncode == 0, native.stderr
    fresh.files.write("/home/user/program.py", PROGRAMS[name])
    guest = fresh.commands.run("python3 program.py; echo after $?", cwd="/home/user", timeout=120)
    assert guest.stdout == native.stdout + "after 0\n", guest.stderr
    assert guest.exit_code == 0


WAITS_FOREVER = {
    "empty queue": "import queue; queue.Queue().get()",
    "event": "import threading; threading.Event().wait()",
    "lock taken twice": "import threading; l = threading.Lock(); l.acquire(); l.acquire()",
    "queue join": "import queue; q = queue.Queue(); q.put(1); q.join()",
    "future never set": "import concurrent.futures as cf; cf.Future().result()",
    "a task waits for a later one": ("import concurrent.futures as cf, threading; e = threading.Event()\n"
                                     "with cf.ThreadPoolExecutor() as p:\n"
                                     "    first = p.submit(e.wait)\n    p.submit(e.set)\n"
                                     "print(type(first.exception()).__name__)"),
}


def test_a_wait_no_other_thread_could_end_raises_and_the_line_goes_on(fresh: Sandbox) -> None:
    """Linux would hang until the command's timeout; the guest's C lock trapped (exit 134, no
    message, the rest of the line lost). Now: a RuntimeError naming the deadlock."""
    for name, source in WAITS_FOREVER.items():
        fresh.files.write("/home/user/w.py", source)
        started = time.monotonic()
        run = fresh.commands.run("python3 w.py; echo after $?", cwd="/home/user", timeout=60)
        assert time.monotonic() - started < 30, name
        if name == "a task waits for a later one":  # the task's error is the task's future's
            assert run.stdout == "RuntimeError\nafter 0\n", (name, run.stdout, run.stderr)
            continue
        assert run.stdout == "after 1\n", (name, run.stdout, run.stderr)
        assert "RuntimeError: deadlock: this waits, without a timeout, for another thread" in run.stderr, name


def test_what_cannot_start_says_why(fresh: Sandbox) -> None:
    cases = {
        "import threading; threading.Thread(target=print).start()": "RuntimeError: can't start new thread: ",
        "import threading; threading.Timer(1, print).start()": "RuntimeError: can't start new thread: ",
        "import multiprocessing; multiprocessing.Process(target=print).start()":
            "RuntimeError: can't start new process: ",
    }
    for source, error in cases.items():
        run = fresh.commands.run(f"python3 -c '{source}'; echo after $?", timeout=60)
        assert run.stdout == "after 1\n", (source, run.stdout, run.stderr)
        assert error in run.stderr, (source, run.stderr)
    run = fresh.commands.run("python3 -c 'import threading; t = threading.Thread(target=print)\n"
                             "try:\n    t.start()\n"
                             "except RuntimeError:\n    print(threading.active_count(), t.is_alive())'")
    assert run.stdout == "1 False\n", run.stderr


def test_timeout_still_stops_a_wait_and_a_pools_task(fresh: Sandbox) -> None:
    """A wait with a long timeout sleeps through `time.sleep`, which a `timeout` command's deadline
    replaces; a task run inline lets that deadline through instead of keeping it in its future."""
    for source in ("import threading; threading.Event().wait(30)",
                   "import concurrent.futures as cf, time\n"
                   "cf.ThreadPoolExecutor().submit(time.sleep, 30)\nprint('not reached')"):
        started = time.monotonic()
        run = fresh.commands.run(f"timeout 1 python3 -c \"{source}\"; echo status $?", timeout=60)
        assert run.stdout == "status 124\n", (source, run.stdout, run.stderr)
        assert time.monotonic() - started < 15
