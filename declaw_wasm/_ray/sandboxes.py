"""`RaySandboxes`: sandboxes on a Ray cluster (`ray[:address]`), for more cores than one machine has.

Ray does the distributed work: its actors (`SandboxHost`, actor.py) host the sandboxes, each
declaring the CPU and memory it reserves; Ray places them (`SPREAD` over the nodes), carries
every call (`actor.call.remote`) and every command's output (pulled in calls of its own), and its
autoscaler, dashboard and cluster launcher apply unchanged. Ours is only "least loaded host" for
each create (up to 8 hosts, sampled, report their live sandboxes in one parallel round of
calls), and keeping the number of hosts: a host whose node dies is not restarted by Ray
(`max_restarts=0`, so calls to it fail at once instead of waiting for a restart that may never
find room) but replaced by a fresh one, which Ray places wherever there is room.

A sandbox's id names its host actor (`sbx_<128 bits>.declaw-host-<name>`), so any driver of the
cluster can reach it by id with `backend="ray"`, while the driver that made the hosts lives.

Secrets: a sandbox's `envs` (and a command's or cell's), a create's secret values and
resolved vault refs, and the state store's signing key, travel as arguments of their own,
refused above 64 KiB, under Ray's 100 KiB limit for arguments inlined in the call: Ray never
puts them in its object store, and nothing of ours calls `ray.put`. Secret values cross to
another machine only when Ray's connections are TLS (`RAY_USE_TLS`); otherwise such a sandbox
goes to a host on this machine. Files move in 64 KiB chunks and output in 64 KiB messages for
the same reason. Ray authenticates at most with one shared cluster token and does not encrypt:
a cluster belongs on a trusted network (docs/scale.md).

What a host answers is never unpickled here: it is bytes of the pool's codec, taken from Ray
still serialized and decoded within the codec's bounds (`fetch`). That closes the channel to a
host a guest had taken over; the cluster stays one trust domain (docs/scale.md, "Ray and trust").
"""

from __future__ import annotations

import itertools
import random
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Iterator, List, Optional, Union

from .._args import checkpoint_policy
from .._backend import tools_unreachable
from .._pool.client import (CALL_WAIT, HostedSandbox, HostLost, Recovery, call_wait, create_arguments, expect,
                             raised, refuse_host_only, state_key_for, stream_wait)
from .._pool.codec import MAX_MESSAGE, BadMessage, unpack
from .._printable import logger
from ..exceptions import (InvalidArgumentException, RateLimitException, SandboxException,
                          SandboxNotFoundException, TimeoutException)
from ..limits import Limits
from ..models import SandboxInfo, Snapshot
from ..wire import CreateSandbox, ErrorBody, ResumeSandbox
from .actor import CHUNK, SandboxHost

NAMESPACE = "declaw-wasm"
PREFIX = "declaw-host-"
MAX_ENVS = 64 << 10  # bytes of envs per call (names and values): Ray inlines arguments < 100 KiB
LIST_WAIT = 5.0  # seconds `list` waits for the hosts' answers
PLACE_SAMPLE = 8  # hosts asked for their load per create (all of them when there are fewer)
PLACE_WAIT = 0.5  # seconds placement waits for hosts' loads before choosing among those that answered
RUN_WAIT = 10.0  # seconds a foreground command without callbacks runs in one call before it streams
FIRST_WAIT = 0.02  # seconds a restore's placement waits for more hosts once one answered
HOST_START = 120.0  # seconds a create waits for some host when none has answered yet
MAX_CALLS = 1000  # calls and streams running at once in one host actor
PULL_WAIT = 10.0  # seconds a stream's pull waits in the actor for news before answering none
READY_WAIT = 30.0  # seconds `host_of` waits for a host's answer
KEEP_KNOWN = 100_000  # sandbox ids this process made or met (for calls by id without backend=)


def _split_envs(args: tuple[Any, ...]) -> tuple[list[Any], Optional[dict[str, str]]]:
    """The request's envs, taken out to travel as an argument of their own (secrets stay inline)."""
    out: list[Any] = []
    envs: Optional[dict[str, str]] = None
    for arg in args:
        if envs is None and getattr(arg, "envs", None) and hasattr(arg, "model_copy"):
            envs = dict(arg.envs)
            arg = arg.model_copy(update={"envs": None})
        out.append(arg)
    if envs is not None:
        size = sum(len(k.encode()) + len(v.encode()) for k, v in envs.items())
        if size > MAX_ENVS:
            raise InvalidArgumentException(
                f"envs of {size} bytes: on Ray they must stay under {MAX_ENVS} bytes, so that Ray "
                "passes them inline and never stores these values in its object store")
    return out, envs


class BadAnswer(SandboxException):
    """A host actor answered with something other than one message of the pool's codec."""


class Gone(SandboxException):
    """Ray says the host actor (its process or its node) is gone."""


# Ray's error markers (`ErrorType`) meaning the actor cannot answer any more
GONE = frozenset({"ACTOR_DIED", "ACTOR_UNAVAILABLE", "WORKER_DIED", "NODE_DIED", "LOCAL_RAYLET_DIED",
                  "ACTOR_PLACEMENT_GROUP_REMOVED", "ACTOR_UNSCHEDULABLE_ERROR", "OWNER_DIED"})


def fetch(ref: Any, timeout: Optional[float]) -> Any:
    """What a host actor answered (`ref`): one message of the pool's codec, decoded within its
    bounds (`_pool.codec.unpack`).

    Not `ray.get`: it deserializes whatever the actor's process stored, and Ray pickles every
    value that is not `bytes` (its task errors carry pickled exceptions too), so an actor a
    guest had taken over could run code here through its answer. The answer is taken from
    Ray's core worker still serialized and accepted only as Ray's raw bytes (what Ray makes of
    a `bytes` return, never pickled), at most the codec's `MAX_MESSAGE`; Ray's own error
    markers (a dead actor or node, a cancelled call) are read from the metadata alone, never
    from the pickles beside them. Anything else is a `BadAnswer`. `timeout`: seconds
    (TimeoutException past them); None: as long as Ray says the actor lives.

    Through Ray Client (`ray://`) the answer is deserialized by Ray's client server first,
    out of our hands: there it is `ray.get`, and only `bytes` are accepted."""
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        if ray.util.client.ray.is_connected():
            value = ray.get(ref, timeout=timeout)
            if not isinstance(value, bytes):
                raise BadAnswer(f"a host answered a {type(value).__name__}, not bytes")
            return _decoded(value)
        data, metadata = _serialized(ref, timeout)
    except GetTimeoutError:
        raise TimeoutException(f"no answer within {timeout} s") from None
    kind = bytes(metadata or b"").split(b",")[0]
    if kind == b"RAW":
        size = 0 if data is None else len(data)
        if size > MAX_MESSAGE:
            raise BadAnswer(f"an answer of {size} bytes, more than {MAX_MESSAGE}")
        return _decoded(b"" if data is None else bytes(data))
    if kind.isdigit():
        from ray.core.generated.common_pb2 import ErrorType  # type: ignore[attr-defined]

        try:
            name = ErrorType.Name(int(kind))
        except ValueError:
            name = f"error {int(kind)}"
        if name in GONE:
            raise Gone(name)
        raise SandboxException(f"Ray failed the call ({name})")
    raise BadAnswer(f"an answer Ray would have to unpickle ({kind[:20].decode('ascii', 'replace')!r}), "
                    "not raw bytes")


def _serialized(ref: Any, timeout: Optional[float]) -> tuple[Any, Any]:
    """(data, metadata) of an object, as Ray's core worker holds it (nothing deserialized)."""
    from ray._private.worker import global_worker

    timeout_ms = -1 if timeout is None else max(0, int(timeout * 1000))
    core = global_worker.core_worker  # type: ignore[attr-defined]
    try:
        found = core.get_objects([ref], timeout_ms)
    except TypeError:  # Ray before 2.20: get_objects(refs, current task id, timeout_ms)
        found = core.get_objects([ref], global_worker.current_task_id, timeout_ms)
    return found[0][0], found[0][1]


def _decoded(data: bytes) -> Any:
    try:
        answer = unpack(data)
    except BadMessage as exc:
        raise BadAnswer(str(exc)) from None
    if isinstance(answer, list) and len(answer) == 2 and answer[0] == "error":
        if not isinstance(answer[1], ErrorBody):
            raise BadAnswer("a malformed error")
        raise raised(answer[1])
    return answer


class RayLink:
    """One host actor, as a `Link` (_pool/client.py)."""

    chunk = CHUNK
    same_machine = False  # an actor may be on any node

    def __init__(self, handle: Any, name: str, owner: Optional["RaySandboxes"] = None) -> None:
        self.handle = handle
        self.name = name
        self.owner = owner
        self.ip: Optional[str] = None
        self.lease_owner: Optional[str] = None

    def _lost(self, exc: Exception) -> HostLost:
        if self.owner is not None:
            self.owner.host_died(self)
        return HostLost(f"the Ray actor {self.name} hosting it died ({exc}: its node or process failed)")

    def _refused(self, exc: BadAnswer) -> HostLost:
        """A host that answered what is not a message is not ours any more: killed, replaced."""
        import ray

        try:
            ray.kill(self.handle, no_restart=True)
        except Exception:  # gone already
            pass
        if self.owner is not None:
            self.owner.host_died(self)
        return HostLost(f"the Ray actor {self.name} hosting it sent a bad answer ({exc}), so it was killed")

    def answer(self, ref: Any, timeout: Optional[float], what: str) -> Any:
        """The decoded answer to a call (`fetch`), Ray's failures as the API's exceptions. An
        answer that is not one (a `BadAnswer`, or anything raised while reading it) kills and
        replaces the host: its sandboxes are lost, and no create samples it again."""
        from ray.exceptions import RayError

        try:
            return fetch(ref, timeout)
        except Gone as exc:
            raise self._lost(exc) from None
        except BadAnswer as exc:
            raise self._refused(exc) from None
        except TimeoutException:
            raise TimeoutException(f"the Ray actor {self.name} did not answer {what} within {timeout:g} s") from None
        except RayError as exc:
            raise SandboxException(f"Ray failed the call {what}: {exc}") from None
        except SandboxException:  # the host's own error for the call, as the API's exception
            raise
        except Exception as exc:  # anything else out of reading the answer is the answer's fault
            raise self._refused(BadAnswer(f"{type(exc).__name__}: {str(exc)[:300]}")) from None

    def lend_tools(self, spec: Any) -> list[Any]:
        """Host tools cannot be called back from a Ray actor (another process, maybe another
        machine): refused."""
        raise tools_unreachable("Ray")

    def return_tools(self, token: str) -> None:
        pass

    def call(self, sandbox_id: Optional[str], method: str, *args: Any, secrets: Any = None) -> Any:
        """One call; `secrets` (a create's, `create_arguments`) travel as an argument of their
        own, as `envs` do."""
        plain, envs = _split_envs(args)
        extra = () if secrets is None else (secrets,)
        ref = self.handle.call.remote(sandbox_id, method, plain, envs, *extra,
                                      state_key=state_key_for(sandbox_id, method))
        reply = self.answer(ref, call_wait(method, args), method)
        if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == "ok"):
            raise self._refused(BadAnswer(f"a malformed answer to {method}"))
        return reply[1]

    def owner_name(self) -> str:
        """The host's name on the leases it takes (`host:pid`), asked once: after its death
        another host breaks its leases by it (node-loss checkpoints)."""
        if self.lease_owner is None:
            self.lease_owner = expect(self.call(None, "owner"), str, "owner")
        return self.lease_owner

    def adopt(self, host_id: str, fresh: bool = False) -> HostedSandbox:
        """(A Ray sandbox's id names its host: a host can only ever name its own sandboxes.)"""
        if self.owner is None:
            return HostedSandbox(self, f"{host_id}.{self.name}", host_id)
        return self.owner._met(self, host_id)

    def run(self, sandbox_id: str, request: Any) -> Union[List[Any], Iterator[Any]]:
        """A foreground command nobody streams: one call for its start, output and end when it
        ends within `RUN_WAIT` s (the list of its messages), else those and a stream of the rest."""
        plain, envs = _split_envs((request,))
        reply = self.answer(self.handle.run.remote(sandbox_id, plain, envs, RUN_WAIT), RUN_WAIT + CALL_WAIT, "run")
        if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], list)
                and isinstance(reply[1], (str, type(None)))):
            raise self._refused(BadAnswer("a malformed answer to run"))
        messages, token = reply
        if token is None:
            return messages
        return itertools.chain(messages, self.stream(sandbox_id, "follow", token))

    def stream(self, sandbox_id: str, op: str, *args: Any) -> Iterator[Any]:
        """A stream's messages, pulled a batch at a time (`stream_open`, then `stream_next`
        until it ends; each waits up to `PULL_WAIT` s in the actor for news)."""
        plain, envs = _split_envs(args)
        opened = self.answer(self.handle.stream_open.remote(sandbox_id, op, plain, envs, PULL_WAIT),
                             PULL_WAIT + CALL_WAIT, op)
        if not (isinstance(opened, list) and len(opened) == 2 and isinstance(opened[0], (str, type(None)))
                and isinstance(opened[1], list)):
            raise self._refused(BadAnswer(f"a malformed answer to {op}"))

        wait = stream_wait(op, args)  # the whole stream's
        until = None if wait is None else time.monotonic() + wait

        def items() -> Iterator[Any]:
            token, first = opened
            try:
                yield from first
                while token is not None:
                    if until is not None and time.monotonic() > until:
                        raise TimeoutException(f"the Ray actor {self.name} did not end {op} within {wait:g} s")
                    pulled = self.answer(self.handle.stream_next.remote(token, PULL_WAIT), PULL_WAIT + CALL_WAIT, op)
                    if not (isinstance(pulled, list) and len(pulled) == 2 and isinstance(pulled[0], bool)
                            and isinstance(pulled[1], list)):
                        raise self._refused(BadAnswer(f"a malformed answer to {op}"))
                    if pulled[0]:
                        token = None
                    yield from pulled[1]
            finally:
                if token is not None:  # the caller stopped reading: the actor stops making them
                    try:
                        self.handle.stream_close.remote(token)
                    except Exception:  # the actor is gone
                        pass
        return items()


def _located(links: List[RayLink]) -> List[RayLink]:
    """The hosts whose machine is known, asking those not asked yet in one parallel round
    (`PLACE_WAIT` at most: a host still starting, or not placed, is no place for a sandbox now)."""
    import ray

    asked = {link.handle.ready.remote(): link for link in links if link.ip is None}
    if asked:
        ready, waiting = ray.wait(list(asked), num_returns=len(asked), timeout=PLACE_WAIT)
        for ref in ready:
            try:
                asked[ref].ip = expect(asked[ref].answer(ref, 0, "ready"), dict, "ready").get("ip", "")
            except SandboxException:
                continue
        _cancel(waiting)
    return [link for link in links if link.ip is not None]


def secrets_may_cross() -> bool:
    """Whether secret values may go to a host on another machine: only when Ray's own
    connections are TLS (`RAY_USE_TLS`). Otherwise a sandbox with secrets is placed on a host of
    this machine, and a Ray Client driver (whose every call crosses the network) is refused."""
    import os

    import ray

    if os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true", "yes"):
        return True
    if ray.util.client.ray.is_connected():
        raise InvalidArgumentException(
            "secrets: this driver reaches Ray through Ray Client, whose connection is not encrypted "
            "(RAY_USE_TLS is off): secret values would cross the network in the clear "
            "(docs/scale.md, \"Secrets on Ray\")")
    return False


def _cancel(refs: List[Any]) -> None:
    """Give up waiting for these calls (a host still starting will answer them to nobody)."""
    import ray

    for ref in refs:
        try:
            ray.cancel(ref)
        except Exception:  # already done, or not cancellable: harmless either way
            pass


def parse_id(sandbox_id: str) -> Optional[tuple[str, str]]:
    """(the host's own id, the host actor's name) of a Ray sandbox id, or None."""
    local, dot, host = sandbox_id.partition(".")
    return (local, host) if dot and local and host.startswith(PREFIX) else None


# Wasmtime turns a guest's traps (an out-of-bounds access, `unreachable`) into host signals
# (SIGSEGV, SIGILL) that its own handler catches. Ray's core worker installs absl's failure signal
# handler over it, which does not hand such a signal back: the first guest trap in a Ray process
# would kill it. Ray's switch for that handler, for this driver (when it starts Ray) and for every
# host actor.
TRAP_SAFE_ENV = {"RAY_DISABLE_FAILURE_SIGNAL_HANDLER": "1"}


def host_env() -> dict[str, str]:
    """The environment a host actor gets from this driver: Ray's switch for guest traps, and the
    driver's state store (`DECLAW_WASM_STATE`, and its namespace), so that every host shares the
    one store snapshots, pauses and node-loss checkpoints live in (it must name a place every node
    reaches: `s3://...`, a shared folder); unset, each node uses its own default. Never the
    state key: `runtime_env` is kept in Ray's GCS and shown by its dashboard; the key goes with
    the calls that need it (`state_key_for`)."""
    from ..settings import state_store_env

    return {**TRAP_SAFE_ENV, **state_store_env()}  # the store, and this process's part of it


def keep_wasm_traps() -> None:
    """Ask Ray not to take over the fault signals in this process (before `ray.init`); warn if a
    Ray already started here with its handler, since in-process guests' traps would then crash."""
    import os

    import ray

    if ray.is_initialized() and os.environ.get("RAY_DISABLE_FAILURE_SIGNAL_HANDLER") != "1":
        logger("declaw_wasm").warning(
            "Ray was started in this process with its failure signal handler: a guest trap in an "
            "in-process sandbox here would crash the process; start Ray with "
            "RAY_DISABLE_FAILURE_SIGNAL_HANDLER=1 (docs/scale.md)")
    for name, value in TRAP_SAFE_ENV.items():
        os.environ.setdefault(name, value)
    # Ray reads the switch once, when `ray._private.ray_constants` is first imported (often long
    # before `ray.init`, by any `import ray`); its core worker reads the constant at init.
    from ray._private import ray_constants

    if os.environ.get("RAY_DISABLE_FAILURE_SIGNAL_HANDLER") == "1":
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True


class RaySandboxes:
    """The sandboxes of a Ray cluster (the `Sandboxes` of `ray[:address]`).

    `hosts`: how many host actors (default: one per `host_cpus` of the CPUs free in the cluster
    when first used; give it for a cluster that autoscales); `host_cpus`, `host_memory`,
    `host_resources`: what each host reserves from Ray's scheduler (custom resources pin hosts
    to a group of nodes).
    """

    host_class: type = SandboxHost  # what each host actor runs (tests run hostile ones)

    def __init__(self, address: Optional[str] = None, hosts: Optional[int] = None,
                 host_cpus: float = 1.0, host_memory: int = 2 << 30,
                 host_resources: Optional[dict[str, float]] = None) -> None:
        import ray

        keep_wasm_traps()
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True)
        self.hosts = hosts
        self.host_cpus = host_cpus
        self.host_memory = host_memory
        self.host_resources = dict(host_resources or {})
        self._lock = threading.Lock()
        self._links: dict[str, RayLink] = {}
        self._gone: "OrderedDict[str, None]" = OrderedDict()  # hosts that died
        self._pending: dict[str, int] = {}
        self._known: "OrderedDict[str, None]" = OrderedDict()
        self._recoveries: dict[str, Recovery] = {}  # checkpointed sandboxes (by every id they had)

    # -- hosts --------------------------------------------------------------------------------------
    def _own(self) -> List[RayLink]:
        """This driver's hosts, started on first use; the first use waits until they have all
        loaded the runtime (or `HOST_START` passed), so that the first creates spread."""
        import ray

        with self._lock:
            if self._links:
                return list(self._links.values())
            free = ray.available_resources().get("CPU", 1)
            for _ in range(self.hosts or max(1, int(free // self.host_cpus))):
                self._start_host()
            links = list(self._links.values())
        ray.wait([link.handle.ready.remote() for link in links], num_returns=len(links), timeout=HOST_START)
        return links

    def _start_host(self) -> None:
        """One more host actor (under `_lock`)."""
        import ray

        name = PREFIX + secrets.token_hex(6)
        handle: Any = ray.remote(self.host_class).options(
            name=name, namespace=NAMESPACE, num_cpus=self.host_cpus, memory=self.host_memory,
            resources=self.host_resources or None, max_concurrency=MAX_CALLS, max_restarts=0,
            scheduling_strategy="SPREAD", runtime_env={"env_vars": host_env()}).remote(name)
        self._links[name] = RayLink(handle, name, self)
        self._pending[name] = 0

    def host_died(self, link: RayLink) -> None:
        """A host of ours is gone (its node or process died): its sandboxes are lost; a fresh
        host takes its place (Ray puts it wherever there is room, when there is)."""
        with self._lock:
            if self._links.get(link.name) is not link:
                return
            del self._links[link.name]
            self._gone[link.name] = None
            while len(self._gone) > KEEP_KNOWN:
                self._gone.popitem(last=False)
            self._start_host()

    def _link(self, name: str) -> RayLink:
        """A host by name: ours, or one of another driver of the cluster."""
        import ray

        with self._lock:
            link = self._links.get(name)
            gone = name in self._gone
        if link is not None:
            return link
        if gone:
            raise HostLost(f"the Ray actor {name} hosting it died (its node or process failed)")
        try:
            return RayLink(ray.get_actor(name, namespace=NAMESPACE), name)
        except ValueError:
            raise SandboxNotFoundException(f"no Ray actor {name!r}: its sandboxes are gone (its node "
                                           "died, or the driver that made it exited)") from None

    def _pick(self, here_only: bool = False, first: bool = False) -> RayLink:
        """The least loaded host among those that answer within `PLACE_WAIT` (or, when none
        does yet — the hosts are still loading the runtime — the first that answers). With more
        than `PLACE_SAMPLE` hosts, among a random sample of that many: a create then costs the
        same on 10 hosts as on 10,000, and sampled least-loaded placement stays near even (the
        "power of d choices")."""
        import ray

        links = self._own()
        if here_only:
            here = ray.util.get_node_ip_address()
            links = [link for link in _located(links) if link.ip == here]
            if not links:
                raise InvalidArgumentException(
                    "secrets: no Ray sandbox host runs on this machine, and Ray's connections are "
                    "not encrypted (RAY_USE_TLS is off): secret values would cross the network in "
                    "the clear. Turn on Ray's TLS, or create the sandbox in-process "
                    "(docs/scale.md, \"Secrets on Ray\")")
        if len(links) > PLACE_SAMPLE:
            links = random.sample(links, PLACE_SAMPLE)
        refs = {link.handle.load.remote(): link for link in links}
        ready, waiting = ray.wait(list(refs), num_returns=1 if first else len(refs),
                                  timeout=HOST_START if first else PLACE_WAIT)
        if first and waiting:  # a restore: the hosts that answer at once (one still starting may not)
            more, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=FIRST_WAIT)
            ready += more
        if not ready:
            ready, waiting = ray.wait(list(refs), num_returns=1, timeout=HOST_START)
        loads: dict[str, int] = {}
        for ref in ready:
            try:  # a host that died or answered nonsense is replaced by `answer`
                loads[refs[ref].name] = expect(refs[ref].answer(ref, 0, "load"), int, "load")
            except SandboxException:
                continue
        _cancel(waiting)
        if not loads:
            raise RateLimitException("no Ray sandbox host answered (is the cluster short of the "
                                     f"CPU ({self.host_cpus}) or memory each host reserves?)")
        with self._lock:
            loads = {n: load for n, load in loads.items() if n in self._links}
            if not loads:
                raise RateLimitException("no Ray sandbox host is alive at the moment")
            name = min(loads, key=lambda n: loads[n] + self._pending[n])
            self._pending[name] += 1
            return self._links[name]

    # -- Sandboxes ----------------------------------------------------------------------------------
    def create(self, request: CreateSandbox) -> HostedSandbox:
        if request._host_only.get("tools") is not None:
            raise tools_unreachable("Ray")
        plain, secrets = create_arguments(request)
        link = self._pick(here_only=secrets is not None and not secrets_may_cross())
        try:
            local = str(link.call(None, "create", plain, secrets=secrets))
            owner = link.owner_name() if checkpoint_policy(request.lifecycle) else None
        finally:
            self._placed(link)
        recovery = None if owner is None else \
            Recovery(self._relocate, secrets, owner, link, local, f"{local}.{link.name}")
        hosted = self._met(link, local, recovery)
        hosted.limit_output((request.limits or Limits()).output_limit)
        return hosted

    def _placed(self, link: RayLink) -> None:
        with self._lock:
            if link.name in self._pending:
                self._pending[link.name] -= 1

    def _relocate(self, recovery: Recovery) -> tuple[Any, ...]:
        """Restore a checkpointed sandbox whose host died on the first live host that answers
        (one of this machine when it has secrets and Ray's connections are not TLS)."""
        secrets = recovery.secrets
        link = self._pick(here_only=secrets is not None and not secrets_may_cross(), first=True)
        try:
            local, turn, what = link.call(None, "recover", recovery.where[1], recovery.owner, secrets=secrets)
            owner = link.owner_name()
        finally:
            self._placed(link)
        self._met(link, str(local), recovery)
        return link, str(local), f"{local}.{link.name}", owner, int(turn), str(what)

    def connect(self, sandbox_id: str, timeout: Optional[float] = None) -> HostedSandbox:
        with self._lock:
            recovery = self._recoveries.get(sandbox_id)
        if recovery is not None:  # checkpointed: wherever it lives now (restored after a loss)
            hosted = HostedSandbox(recovery.where[0], recovery.where[2], recovery.where[1], recovery)
            for attempt in range(2):
                link = hosted.link
                try:
                    hosted._host_call("connect", hosted.host_id, timeout)
                    break
                except HostLost:  # restored from its checkpoint meanwhile: connect to that one
                    if attempt or hosted.link is link:
                        raise
            return hosted
        parts = parse_id(sandbox_id)
        if parts is None:
            raise SandboxNotFoundException(f"sandbox {sandbox_id!r} not found (not a Ray sandbox id)")
        link = self._link(parts[1])
        try:
            link.call(None, "connect", parts[0], timeout)
        except HostLost as exc:
            raise HostLost(f"sandbox {sandbox_id} is lost: {exc}") from None
        return self._met(link, parts[0])

    def list(self) -> List[SandboxInfo]:
        import ray

        names = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                 if a.get("namespace") == NAMESPACE and str(a.get("name", "")).startswith(PREFIX)}
        with self._lock:
            names |= set(self._links)
        links = []
        for name in sorted(names):
            try:
                links.append(self._link(name))
            except SandboxException:
                continue
        state_key = state_key_for(None, "list_sandboxes")
        refs = {link.handle.call.remote(None, "list_sandboxes", [], None, state_key=state_key): link for link in links}
        ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=LIST_WAIT)
        _cancel(waiting)  # a host still starting has no sandboxes yet
        infos: List[SandboxInfo] = []
        for ref in ready:
            link = refs[ref]
            try:
                reply = link.answer(ref, 0, "list_sandboxes")
                if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == "ok"):
                    continue
                found = expect(reply[1], [SandboxInfo], "list_sandboxes")
            except SandboxException:  # a host whose node is gone: its sandboxes are too
                continue
            infos += [i.model_copy(update={"sandbox_id": f"{i.sandbox_id}.{link.name}"}) for i in found]
        return sorted(infos, key=lambda i: i.started_at, reverse=True)

    # -- state: the store must be one every host reaches (DECLAW_WASM_STATE: s3://..., a shared folder)
    def restore(self, sandbox_id: str, snapshot_id: Optional[str], request: ResumeSandbox) -> HostedSandbox:
        refuse_host_only(request, "Ray")
        parts = parse_id(sandbox_id)
        local = parts[0] if parts is not None else sandbox_id
        link = self._pick()
        try:
            made = str(link.call(None, "restore", local, snapshot_id, request))
        finally:
            with self._lock:
                if link.name in self._pending:
                    self._pending[link.name] -= 1
        return self._met(link, made)

    def list_snapshots(self, sandbox_id: Optional[str] = None) -> List[Snapshot]:
        parts = parse_id(sandbox_id) if sandbox_id else None
        found: List[Snapshot] = self._any().call(None, "snapshots", parts[0] if parts else sandbox_id)
        return found

    def delete_snapshot(self, sandbox_id: str, snapshot_id: str) -> bool:
        parts = parse_id(sandbox_id)
        return bool(self._any().call(None, "drop_snapshot", parts[0] if parts else sandbox_id, snapshot_id))

    def _any(self) -> RayLink:
        link = self._pick()
        with self._lock:
            if link.name in self._pending:
                self._pending[link.name] -= 1
        return link

    def _met(self, link: RayLink, local: str, recovery: Optional[Recovery] = None) -> HostedSandbox:
        sandbox_id = f"{local}.{link.name}"
        with self._lock:
            self._known[sandbox_id] = None
            self._known.move_to_end(sandbox_id)
            if recovery is not None:
                self._recoveries[sandbox_id] = recovery
            while len(self._known) > KEEP_KNOWN:
                self._recoveries.pop(self._known.popitem(last=False)[0], None)
        return HostedSandbox(link, sandbox_id, local, recovery)

    def knows(self, sandbox_id: str) -> bool:
        with self._lock:
            return sandbox_id in self._known

    def host_of(self, sandbox_id: str) -> dict[str, Any]:
        """Where a sandbox runs: its host actor's name, node id and pid (for tests and operators)."""
        parts = parse_id(sandbox_id)
        if parts is None:
            raise SandboxNotFoundException(f"sandbox {sandbox_id!r} is not a Ray sandbox")
        link = self._link(parts[1])
        info: dict[str, Any] = expect(link.answer(link.handle.ready.remote(), READY_WAIT, "ready"), dict, "ready")
        return info


_current: Optional[RaySandboxes] = None
_current_lock = threading.Lock()


def ray_sandboxes(address: Optional[str] = None, **config: Any) -> RaySandboxes:
    """This process's Ray backend (a driver talks to one cluster), made on first use: connecting
    to `address` (`auto`, `ray://host:10001`; None: the running connection, or Ray's default)
    unless Ray is already initialized. `config` (hosts, host_cpus, host_memory) applies to the
    first call only."""
    global _current
    with _current_lock:
        if _current is None:
            _current = RaySandboxes(address, **config)
        return _current


def home_of(sandbox_id: str) -> Optional[RaySandboxes]:
    """This process's Ray backend, if it made or met the sandbox."""
    with _current_lock:
        current = _current
    return current if current is not None and current.knows(sandbox_id) else None
