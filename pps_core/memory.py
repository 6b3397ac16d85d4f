"""The Memory facade: one entity's plugins, layers and catalog, opened and closed together."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import pluggy

from .catalog import EVERY_LAYER, Catalog, Operation, to_jsonable
from .chat import ChatModel, chat_model
from .embedding import Embedder, SharedQueries
from .errors import ConfigError, PPSError, Unavailable, UnknownOperation, did_you_mean, storage_error
from .events import Events
from .layer import FailedLayer, Layer, WarmingLayer
from .lineage import Lineage, undeclared_observers
from .models import LayerHealth, SearchResult
from .owner import OwnerLock
from .plugins import ENTITY_PART, answers, attribute, build_plugin_manager
from .privacy import reset_secret_scanner, use_secret_scanner
from .ranking import Ranker
from .settings import EntitySettings, load_settings

log = logging.getLogger("pps")

# numpy's BLAS runs on one thread in a process that serves an entity: its parallelism is the layers' (a recall
# searches them at once), and OpenBLAS's own threads spin-wait for a core another layer holds: on 2 busy cores a
# 4,000 x 384 matrix-vector product took 3.5-7.5 ms with two threads, 0.14 ms with one (bench/RESULTS.md,
# issue 26). Read when numpy is first imported (plugins import it lazily, after this); a value set wins.
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
T = TypeVar("T")
L = TypeVar("L", bound=Layer)
#: How long closing waits for the retry of owed forgets begun at open before it cancels it (what is not
#: finished stays owed).
SETTLE_AT_CLOSE_S = 30.0
_IN_WRITE: contextvars.ContextVar[bool] = contextvars.ContextVar("pps_in_write", default=False)


class LayerTimeout(TimeoutError):
    """A layer gave no answer within its budget. ``warming``: it was its first answer of this kind in this process
    (a cold start: a model, an index loading), so it is warming up, not stuck."""

    def __init__(self, layer: str, seconds: float, warming: bool) -> None:
        self.layer, self.seconds, self.warming = layer, seconds, warming
        super().__init__(f"no first answer within {seconds:g}s" if warming else f"no answer within {seconds:g}s")


class UndeclaredLayer(RuntimeError):
    """A call reached a layer its operation does not declare (:attr:`~pps_core.catalog.Operation.reads`), in a
    memory that opened only the declared ones: a bug of the operation's plugin, named at once (the call is not
    run again)."""


#: While a call runs on a memory that left layers unopened: (operation, what it declares reading).
_READS: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("pps_reads", default=None)


class Layers(Mapping[str, Layer]):
    """``memory.layers``: the open layers by name, in plugin order (read-only).

    A memory opened ``lazy`` opens, for each call, the layers its operation reads (:attr:`Operation.reads`); the
    others stay closed. While such a call runs, reaching a closed layer (by name, or the whole map) raises
    :class:`UndeclaredLayer` naming the operation: the declaration is wrong, and a partial memory is never
    mistaken for the whole."""

    def __init__(self, opened: dict[str, Layer], closed: dict[str, Layer]) -> None:
        self._opened = opened
        self._closed = closed

    def _check(self, name: str | None = None) -> None:
        scope = _READS.get()
        if scope is not None and self._closed and (name is None or name in self._closed):
            op, declared = scope
            what = f"layer {name!r}" if name is not None else "every layer"
            raise UndeclaredLayer(f"operation {op!r} reached {what}, which it does not declare (it reads "
                                  f"{declared}): name it in Operation(reads=...), or reads=EVERY_LAYER")

    def __getitem__(self, name: str) -> Layer:
        self._check(name)
        return self._opened[name]

    def __contains__(self, name: object) -> bool:
        self._check(name if isinstance(name, str) else None)
        return name in self._opened

    def __iter__(self) -> Iterator[str]:
        self._check()
        return iter(list(self._opened))

    def __len__(self) -> int:
        self._check()
        return len(self._opened)

    def __repr__(self) -> str:
        return f"Layers({list(self._opened)}, closed={list(self._closed)})"


class WriteGate:
    """Writes through the catalog share the gate; ``paused()`` waits for them to finish and holds new ones."""

    def __init__(self) -> None:
        self._writers = 0
        self._paused = False
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        if _IN_WRITE.get():  # an operation calling another: already inside
            yield
            return
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: not self._paused)
            self._writers += 1
        token = _IN_WRITE.set(True)
        try:
            yield
        finally:
            _IN_WRITE.reset(token)
            async with cond:
                self._writers -= 1
                cond.notify_all()

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: not self._paused)
            self._paused = True
            await cond.wait_for(lambda: self._writers == 0)
        try:
            yield
        finally:
            async with cond:
                self._paused = False
                cond.notify_all()


@dataclass
class BackupLedger:
    """What ``pps_backup`` did in this process for one entity: archives whose backup was cancelled (path -> when),
    and archives it wrote (a cancel arriving after the archive was written deletes it)."""

    cancelled: dict[Path, float] = field(default_factory=dict)
    written: set[Path] = field(default_factory=set)


class Memory:
    """An entity's memory. ``await memory.call("ambient_recall", {"context": "startup"})``.

    ``extra_plugins`` are plugin objects registered beside the configured entry points (tests
    and applications embedding PPS use it). With ``own=True`` the process takes the entity's owner
    lock, so a second owner gets a clear error instead of a corrupted store.

    With ``lazy=True`` (a short-lived command running one call) :meth:`open` builds the catalog and the layers
    but opens no store; each call opens what it needs first: a read, the layers its operation declares
    (:attr:`~pps_core.catalog.Operation.reads`; by default those of the plugin that defines it, all of them if
    that plugin has none); a write, every layer (its events and forgetting reach other plugins). So a SQLite
    read never imports the graph database. A read that reaches a layer it did not declare fails at once with
    :class:`UndeclaredLayer`.

    With ``glance=True`` (a reader that must answer at once while another process owns the entity, or is starting
    to: a cold Claude Code hook) only the layers that declare :attr:`~pps_core.layer.Layer.glance` open, through
    ``open_glance`` (read-only, cheap); every other layer is a :class:`~pps_core.layer.WarmingLayer`. No owner lock
    is taken, no embedder is loaded, no ``memory_opened`` event fires (nothing starts in the background), and
    only read-only operations run: a write is refused as Unavailable.
    """

    def __init__(self, settings: EntitySettings, *, extra_plugins: Sequence[Any] = (), own: bool = True,
                 plugin_manager: pluggy.PluginManager | None = None, lazy: bool = False,
                 glance: bool = False) -> None:
        self.settings = settings
        #: The capture filter's secret detector for this entity (``[privacy]``), active in every call it serves.
        self.secret_scanner = settings.privacy.scanner()
        #: Built by the caller for these settings (``pps serve`` builds one per process start), else at open.
        self._given_pm = plugin_manager
        self.home: Path = Path(settings.home)
        self.tz = ZoneInfo(settings.timezone)
        self._extra_plugins = list(extra_plugins)
        self._own = own and not glance
        #: Whether any number of processes may serve this entity at once (no layer is exclusive: every store is
        #: a server), known once it opens; a transport then keeps no per-process session state (MCP stateless).
        self.shared = False
        self._lazy = lazy and not glance
        #: Opened at a glance (see the class docstring): read-only, the heavy layers warming elsewhere.
        self.glance = glance
        self.lock = OwnerLock(self.home)
        self.pm: pluggy.PluginManager | None = None
        #: The open layers, and those a lazy memory has not opened yet, by name in plugin order.
        self._opened: dict[str, Layer] = {}
        self._closed: dict[str, Layer] = {}
        self.layers: Layers = Layers(self._opened, self._closed)
        #: layer name -> the plugin that provides it; operation name -> the plugin that defines it.
        self._layer_plugin: dict[str, str] = {}
        self._op_plugin: dict[str, str] = {}
        self.rankers: dict[str, Ranker] = {}
        self.catalog: Catalog = Catalog([])
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self.opened = False
        #: Typed event helpers: ``memory.events.message_stored(message)``.
        self.events = Events(self, lambda: self.pm)
        #: Every declared copy of turn-derived text (:mod:`pps_core.lineage`); filled when the memory opens.
        self.lineage = Lineage()
        self._gate = WriteGate()
        #: (layer, kind) that have answered in this process: warm, held to ``[recall] layer_timeout_s``.
        self._warm: set[tuple[str, str]] = set()
        #: Backups cancelled and written by this process (``pps_core.builtin.backup``).
        self.backups = BackupLedger()
        #: Owed forgets retried at open, in the background (:meth:`_settle_owed`).
        self._settling: asyncio.Task[None] | None = None

    @classmethod
    def for_entity(cls, entity: str | None = None, home: str | Path | None = None, **kwargs: Any) -> Memory:
        extra = kwargs.pop("extra_plugins", ())
        own = kwargs.pop("own", True)
        return cls(load_settings(entity, home, **kwargs), extra_plugins=extra, own=own)

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> Memory:
        if self.opened:
            return self
        # What opening starts in the background (upkeep, a recap reading session logs) filters with this entity's
        # detector: tasks copy the context they are created in.
        use_secret_scanner(self.secret_scanner)
        if not self.glance:  # a glance creates nothing, not even the entity's folder
            self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            pm = self.load_catalog()  # before any store opens: a wrong name or parameter costs no store
            silent = undeclared_observers(pm)
            if silent:
                raise ConfigError(f"plugin {silent[0]!r} observes turns but declares no copies of them: implement "
                                  "pps_turn_copies (return [] if it keeps nothing); see pps_core.lineage")
            built = self._build_layers(pm)
            # Stores on a server (every layer non-exclusive) are shared by any number of processes: no lock.
            self.shared = not any(layer.exclusive for layer in built)
            if self._own and not self.shared:
                try:
                    self.lock.acquire()
                except OSError as exc:
                    raise (storage_error(exc) or exc) from exc
            if self.glance:
                await self._open_glance(built)
            elif self._lazy:
                self._closed.update((layer.name, layer) for layer in built)
            else:
                await self._open_layers(built)
            self._collect_rankers(pm)
            self.lineage = Lineage.collect(pm, self)
        except BaseException:
            await self._close_layers()
            self.lock.release()
            raise
        self.opened = True
        if not self.glance:  # a glance starts nothing in the background
            self.events.memory_opened()
            if not self._closed:  # a lazy memory (one call) leaves them to its forget, if it forgets
                self._settling = asyncio.get_running_loop().create_task(self._settle_owed(), name="pps-owed-forgets")
        return self

    async def _settle_owed(self) -> None:
        """Forgets still owed by a copy (a graph that was down, a process killed before its copies forgot) are
        retried as soon as the entity is open (:mod:`pps_core.lineage`); what fails stays owed."""
        from .contracts import OwedForgets

        for store in self.find(OwedForgets):
            try:
                async with self.writing():
                    if not (await store.owed_forgets()):
                        continue
                    done = await store.settle_owed_forgets()
            except Exception as exc:  # stays owed: upkeep and the next forget retry
                log.warning("owed forgets: the retry at open failed: %s: %s", type(exc).__name__, exc)
                continue
            if done.get("settled"):
                log.info("owed forgets: %d finished at open", done["settled"])
            if done.get("owed"):
                log.warning("owed forgets: %d still owed by %s", done["owed"], ", ".join(done.get("pending", {})))

    def load_catalog(self) -> pluggy.PluginManager:
        """Load the entity's plugins and its catalog, opening nothing (``pps operations``, ``--help``)."""
        if self.pm is None:
            pm = self._given_pm
            if pm is None or self._extra_plugins:
                pm = build_plugin_manager(self.settings.plugins, self._extra_plugins)
            attribute(pm)  # a manager not built by build_plugin_manager (an application's own)
            self._register_entity_plugins(pm)
            self.pm = pm
            self._collect_operations(pm)
        return self.pm

    def _register_entity_plugins(self, pm: pluggy.PluginManager) -> None:
        """Register each plugin's object for this entity (``pps_entity_plugin``) as ``"<plugin>:entity"``."""
        for answer in answers(pm, "pps_entity_plugin", memory=self):
            if answer.value is None:
                continue
            name = answer.plugin + ENTITY_PART
            if pm.get_plugin(name) is not None:  # a manager handed from a memory before (``pps serve``)
                pm.unregister(name=name)
            try:
                pm.register(answer.value, name=name)
                attribute(pm, answer.value)
                pm.check_pending()
            except (ValueError, pluggy.PluginValidationError) as exc:
                raise ConfigError(f"plugin {answer.plugin!r}: its entity object could not be registered: {exc}") from None

    def _collect_operations(self, pm: pluggy.PluginManager) -> None:
        ops: list[Operation] = []
        for plugin, batch in _per_plugin(pm, "pps_operations", self):
            for op in batch or []:
                self._op_plugin.setdefault(op.name, plugin)
                ops.append(op)
        try:
            self.catalog = Catalog(ops)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def _build_layers(self, pm: pluggy.PluginManager) -> list[Layer]:
        built: list[Layer] = []
        self._layer_plugin = {}  # a memory opened again builds its layers anew
        for plugin, batch in _per_plugin(pm, "pps_layers", self):
            for layer in batch or []:
                if not layer.name:
                    raise ConfigError(f"layer {type(layer).__name__} has no name")
                if layer.name in self._layer_plugin:
                    raise ConfigError(f"two plugins provide a layer named {layer.name!r}")
                self._layer_plugin[layer.name] = plugin
                built.append(layer)
        return built

    def _reads(self, op: Operation) -> list[str]:
        """The layers ``op`` reads, by name (see :attr:`~pps_core.catalog.Operation.reads`)."""
        every = list(self._layer_plugin)
        if not op.read_only or op.reads == EVERY_LAYER:
            return every
        if op.reads is None:
            plugin = self._op_plugin.get(op.name)
            return [name for name, owner in self._layer_plugin.items() if owner == plugin] or every
        built = {**self._opened, **self._closed}
        names: list[str] = []
        for wanted in op.reads:
            names += ([wanted] if isinstance(wanted, str)
                      else [name for name, layer in built.items() if isinstance(layer, wanted)])
        return [name for name in every if name in names]

    async def _open_closed(self, names: list[str]) -> None:
        """Open layers a lazy memory left closed, keeping the plugin order of ``layers``."""
        wanted = [self._closed.pop(n) for n in names if n in self._closed]
        if not wanted:
            return
        await self._open_layers(wanted)
        order = list(self._layer_plugin)
        opened = sorted(self._opened.items(), key=lambda kv: order.index(kv[0]))
        self._opened.clear()
        self._opened.update(opened)

    async def _open_layers(self, built: list[Layer]) -> None:
        """Open the layers at once (each store's open mostly waits: a file, a thread, an index process), then
        list them in plugin order. A layer that fails to open is reported (:class:`FailedLayer`), not fatal;
        an interruption (cancelled, KeyboardInterrupt) is raised after the others finished, with the layers
        that opened listed, so the caller closes them."""

        async def one(layer: Layer) -> Layer:
            try:
                await layer.open()
            except Exception as exc:  # a down backend is reported, not fatal
                log.warning("layer %s could not open: %s", layer.name, exc)
                try:  # release whatever it opened before failing (threads, files)
                    await layer.close()
                except Exception:
                    pass
                return FailedLayer(layer.name, f"{type(exc).__name__}: {exc}")
            return layer

        if not built:
            return
        tasks = [asyncio.ensure_future(one(layer)) for layer in built]
        try:
            await asyncio.wait(tasks)  # every open ends (or is cancelled with the caller) before anything is listed
        finally:
            interrupted: BaseException | None = None
            for task in tasks:
                if not task.done():
                    task.cancel()
            for task in tasks:
                if not task.done() or task.cancelled():
                    continue
                exc = task.exception()
                if exc is not None:
                    interrupted = interrupted or exc
                    continue
                opened = task.result()
                self._opened[opened.name] = opened
        if interrupted is not None:
            raise interrupted

    async def _open_glance(self, built: list[Layer]) -> None:
        """Open the layers that open at a glance; the others wait for the owner (:class:`WarmingLayer`)."""
        for layer in built:
            if not layer.glance:
                self._opened[layer.name] = WarmingLayer(layer)
                continue
            try:
                await layer.open_glance()
            except Exception as exc:  # not readable this way now: the owner opens it
                log.info("layer %s did not open at a glance: %s", layer.name, exc)
                try:
                    await layer.close()
                except Exception:
                    pass
                self._opened[layer.name] = WarmingLayer(layer, f"warming up: {type(exc).__name__}: {exc}")
                continue
            self._opened[layer.name] = layer

    def warming(self) -> list[Layer]:
        """The layers of a glance still warming up (opened by the owner, not here), in plugin order."""
        return [layer for layer in self._opened.values() if isinstance(layer, WarmingLayer)]

    def _collect_rankers(self, pm: pluggy.PluginManager) -> None:
        for batch in pm.hook.pps_rankers(memory=self):
            for ranker in batch or []:
                if ranker.name in self.rankers:
                    raise ConfigError(f"two plugins provide a ranker named {ranker.name!r}")
                self.rankers[ranker.name] = ranker
        for layer, names in self.settings.rankers.items():
            for name in names:
                if name not in self.rankers:
                    known = ", ".join(sorted(self.rankers)) or "none"
                    raise ConfigError(f"rankers.{layer}: no ranker named {name!r} (loaded: {known})")

    async def close(self) -> None:
        settling, self._settling = self._settling, None
        if settling is not None and not settling.done():  # a copy mid-forget (a graph compacting) ends first
            await asyncio.wait([settling], timeout=SETTLE_AT_CLOSE_S)
            if not settling.done():  # what it has not finished stays owed
                settling.cancel()
                await asyncio.wait([settling])
        if self.opened and not self.glance:
            self.events.memory_closing()
        await self._close_layers()
        self.lock.release()
        self.opened = False

    async def _close_layers(self) -> None:
        """Close the open layers at once (each mostly waits: a checkpoint, an index process stopping); a layer
        that fails to close is logged and the others close all the same."""

        async def one(layer: Layer) -> None:
            try:
                await layer.close()
            except Exception as exc:  # closing must go on for the other layers
                log.warning("layer %s did not close cleanly: %s", layer.name, exc)

        # never-opened layers (a lazy memory's; warming: opened by the owner, not here) need no closing
        closing = [layer for layer in reversed(self._opened.values()) if not isinstance(layer, WarmingLayer)]
        try:
            await asyncio.gather(*(one(layer) for layer in closing))
        finally:
            self._opened.clear()
            self._closed.clear()

    async def __aenter__(self) -> Memory:
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- calls ----------------------------------------------------------------------------------

    def operation(self, name: str) -> Operation:
        op = self.catalog.get(name)
        if op is None:
            raise UnknownOperation(f"unknown operation {name!r} for entity {self.settings.entity!r}"
                                   f"{did_you_mean(name, self.catalog.names())} "
                                   f"(`pps operations` lists them; loaded plugins: {', '.join(self.settings.plugins)})")
        return op

    async def call(self, name: str, params: dict[str, Any] | None = None) -> Any:
        """Validate ``params`` and run the operation; returns plain JSON data or raises PPSError.

        Every call of a known operation fires ``operation_called`` once, with the HTTP-style status it ended with
        (200; a PPSError's status, 422 for parameters refused before the handler; 500 for a bug; 499 cancelled)."""
        op = self.operation(name)
        started = time.perf_counter()
        status = 500
        validated = None
        scanner = use_secret_scanner(self.secret_scanner)  # the one capture filter, with this entity's [privacy]
        try:
            validated = op.validate(params)
            if self.glance and not op.read_only:
                raise Unavailable(f"{name} writes: this process only glances at entity "
                                  f"{self.settings.entity!r} (read-only) while its owner starts; call it there")
            reads = None
            if self._closed:
                await self._open_closed(self._reads(op))
                if self._closed:  # it runs with what it declared: reaching further is UndeclaredLayer
                    declared = op.reads if isinstance(op.reads, str) else ", ".join(
                        r if isinstance(r, str) else r.__name__ for r in op.reads or ()) or "its own plugin's layers"
                    reads = _READS.set((op.name, declared))
            try:
                if op.read_only:
                    result = to_jsonable(await op.handler(self, validated))
                else:
                    async with self._gate.write():
                        result = to_jsonable(await op.handler(self, validated))
            finally:
                if reads is not None:
                    _READS.reset(reads)
            status = 200
            return result
        except PPSError as exc:
            status = exc.status
            raise
        except asyncio.CancelledError:
            status = 499
            raise
        except Exception as exc:  # disk full / read-only home: a clear error instead of a traceback
            mapped = storage_error(exc)
            if mapped is None:
                raise
            status = mapped.status
            raise mapped from exc
        finally:
            reset_secret_scanner(scanner)
            self.events.operation_called(name=name, params={} if validated is None else validated.model_dump(mode="json"),
                                         ok=status == 200, ms=(time.perf_counter() - started) * 1000,
                                         status=status)

    def writing(self) -> contextlib.AbstractAsyncContextManager[None]:
        """A write that does not come through :meth:`call` (a background job storing through a layer's
        contract): it holds the same gate as an operation's write, so :meth:`writes_paused` waits for it. Inside
        an operation it is already held (nothing more happens)."""
        return self._gate.write()

    def writes_paused(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold every write through the catalog (in this process) until the block ends: a consistent moment
        for a backup. Writes in flight finish first; new ones wait."""
        return self._gate.paused()

    def layer(self, name: str) -> Layer | None:
        return self.layers.get(name)

    def find(self, contract: type[T]) -> list[T]:
        """The open layers that fill a contract (a Protocol of :mod:`pps_core.contracts`), in plugin order."""
        for layer in self._closed.values():
            if isinstance(layer, contract):
                self.layers._check(layer.name)  # a call that did not declare it: UndeclaredLayer
        return [layer for layer in self._opened.values()
                if not isinstance(layer, FailedLayer) and isinstance(layer, contract)]

    def layer_names(self) -> list[str]:
        """Every layer of the entity, open or not yet (a lazy memory), in plugin order."""
        return list(self._layer_plugin)

    def is_open(self, layer: Layer) -> bool:
        """Whether ``layer`` (the object a plugin made) is open in this memory: not failed, not warming elsewhere."""
        return self.layers.get(layer.name) is layer

    def require(self, layer: L) -> L:
        """``layer`` (the object a plugin made, :meth:`is_open`), or Unavailable saying why it cannot serve: a
        plugin finds its own layer by the object it built, never by a name."""
        found = self.layers.get(layer.name)
        if found is layer:
            return layer
        why = getattr(found, "reason", None) or "not open"
        raise Unavailable(f"{layer.name} is unavailable for entity {self.settings.entity!r}: {why}")

    def require_layer(self, name: str) -> Layer:
        layer = self.layers.get(name)
        if layer is None:
            raise Unavailable(f"layer {name!r} is not loaded for entity {self.settings.entity!r}")
        return layer

    async def search_layer(self, name: str, query: str, limit: int, offset: int = 0,
                           **filters: Any) -> list[SearchResult]:
        """Search one layer, then run the rankers configured for it, in order.

        ``filters`` (e.g. ``channel="discord:x"``) are passed to the layer's ``search`` as keywords, for layers
        that document them; a filter whose value is None is left out."""
        layer = self.require_layer(name)
        started = time.perf_counter()
        rankers = [self.rankers[n] for n in self.settings.rankers.get(name, [])]
        fetch = limit if not rankers else max(limit * 2, limit + 10)
        given = {k: v for k, v in filters.items() if v is not None}
        results = await (layer.search(query, fetch, offset, **given) if given else layer.search(query, fetch, offset))
        for ranker in rankers:
            results = ranker.rerank(query, results, limit)
        layer.record_latency(started)
        return results[:limit]

    def is_warm(self, layer: str, kind: str) -> bool:
        """Whether ``layer`` has answered a call of ``kind`` (``health``, ``search``, ``startup``...) in this
        process: its model and index are loaded, so ``[recall] layer_timeout_s`` applies."""
        return (layer, kind) in self._warm

    async def answer(self, layer: str, kind: str, awaitable: Awaitable[T], budget_s: float | None = None) -> T:
        """Await one layer's answer within its budget: ``budget_s`` (else ``[recall] layer_timeout_s``) once the
        layer is warm for this kind of call; its first answer in this process gets ``[recall] warmup_timeout_s``
        (at least), since a cold process is still loading its model and index. Raises :class:`LayerTimeout`
        (``warming`` for a first answer) past the budget."""
        rc = self.settings.recall
        limit = budget_s if budget_s is not None else rc.layer_timeout_s
        warming = (layer, kind) not in self._warm
        if warming:
            limit = max(limit, rc.warmup_timeout_s)
        try:
            value = await asyncio.wait_for(awaitable, limit)
        except TimeoutError:
            raise LayerTimeout(layer, limit, warming) from None
        self._warm.add((layer, kind))
        return value

    @contextlib.asynccontextmanager
    async def claim(self, job: str) -> AsyncIterator[bool]:
        """Background work done once across every process serving this entity::

            async with memory.claim("graph-ingest") as mine:
                if mine:
                    ...  # no other server runs "graph-ingest" until this block ends

        True in one process at a time (the claim ends with the block, or with the process: a server killed
        mid-job lets go); False elsewhere, which skips the round and tries again at its next one. The first layer
        filling :class:`~pps_core.contracts.JobClaims` holds it (the turn store on PostgreSQL: an advisory lock);
        an entity without one is served by one process (its store is exclusive, the owner lock says so), which
        always holds it. Only for work whose items are marked done in the store, so the next holder skips them."""
        from .contracts import JobClaims

        holders = self.find(JobClaims)
        if not holders:
            yield True
            return
        async with holders[0].claim_job(job) as mine:
            yield mine

    async def ready(self) -> dict[str, str]:
        """Readiness: {layer name: why it cannot serve now} for each layer that cannot (:meth:`Layer.ready`); empty
        when every layer can. A layer that does not answer within ``[recall] layer_timeout_s`` is not ready."""
        if not self.opened:
            return {"memory": "not open"}
        timeout = self.settings.recall.layer_timeout_s

        async def one(layer: Layer) -> tuple[str, str | None]:
            try:
                return layer.name, await asyncio.wait_for(layer.ready(), timeout)
            except TimeoutError:
                return layer.name, f"did not answer within {timeout:g} s"
            except Exception as exc:
                return layer.name, f"{type(exc).__name__}: {exc}"

        found = await asyncio.gather(*(one(layer) for layer in list(self.layers.values())))
        return {name: why for name, why in found if why is not None}

    async def health(self, *, timed: bool = True) -> dict[str, LayerHealth]:
        """Every layer's health, at once. ``timed=False`` waits for each layer however long it takes: counts read
        from the stores for a check that must not depend on a busy machine (a backup's manifest, a restore)."""
        async def one(layer: Layer) -> LayerHealth:
            try:
                h = await (self.answer(layer.name, "health", layer.health()) if timed else layer.health())
            except LayerTimeout as exc:
                detail = (f"warming up: {exc} (this process is still loading its model and index; ask again)"
                          if exc.warming else f"TimeoutError: {exc}")
                h = LayerHealth(layer=layer.name, available=False, detail=detail, warming=exc.warming)
            except Exception as exc:
                h = LayerHealth(layer=layer.name, available=False, detail=f"{type(exc).__name__}: {exc}".rstrip(": "))
            if h.latency_ms is None:
                h.latency_ms = layer.recent_latency_ms
            return h

        results = await asyncio.gather(*(one(layer) for layer in list(self.layers.values())))
        return {h.layer: h for h in results}

    def chat_model(self, model: str | None = None) -> ChatModel | None:
        """The chat model a plugin provides (``pps_chat_model``; ``model`` asks for another model by name), or
        None when no plugin of the entity provides one."""
        return chat_model(self.pm, self.settings, model)

    @property
    def embedder(self) -> Embedder | None:
        """The entity's embedder (the ``pps_embedder`` hook), or None. One-text calls are shared between the layers
        that ask at the same moment (:class:`~pps_core.embedding.SharedQueries`): a recall embeds its context once.
        None at a glance (no model: searches are lexical)."""
        if self.glance:
            return None
        if not self._embedder_loaded and self.pm is not None:  # before open(): None, not cached
            found = self.pm.hook.pps_embedder(memory=self)
            self._embedder = SharedQueries(found) if found is not None else None
            self._embedder_loaded = True
        return self._embedder


def _per_plugin(pm: pluggy.PluginManager, hook: str, memory: Memory) -> list[tuple[str, Any]]:
    """Each plugin's answer to a ``memory`` hook, with the plugin's name, in plugin order: one pluggy call
    (``PPS_TRACE_PLUGINS`` shows it), its answers attributed by :func:`pps_core.plugins.answers`."""
    return [(answer.plugin, answer.value) for answer in answers(pm, hook, memory=memory)]
