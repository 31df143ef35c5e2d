"""The repository manager: which versions the local engine serves, and when.

`RepositoryManager.start()` discovers the model repository and loads every version in the background
(sessions created and warmed up in a worker thread, the newest version of each model first), so a broken
version is recorded as failed and the others still serve. Each change of a version's state swaps in a new
`Catalog` (app/engine/catalog.py), which is all the front end reads. Each ready version gets a
`VersionHost` (app/engine/host.py: its manifest, sessions and batcher); the versions as held are in
app/engine/served.py.

Loads (start-up, poll, the repository API) read files and create sessions in threads of their own with a
deadline (RSA_LOAD_TIMEOUT_S, app/engine/threads.py), holding only their model's lock: a read that hangs
fails its load when the deadline passes and never holds up other models' loads, unloads or readiness.
Versions held (loading, ready, unloading, and hung loads given up on) are bounded by RSA_MAX_LOADED_VERSIONS.
Names from clients go through the repository's name rule (app/artifacts/repository.py) first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from types import MappingProxyType

import onnxruntime as ort

from app.artifacts.policy import PolicyError, read_policy
from app.artifacts.repository import (
    ModelRef,
    NameRefused,
    RepositoryError,
    VersionRef,
    check_model_name,
    discover,
    model_folder,
    model_names,
    public_message,
    read_model,
)
from app.core.config import Settings
from app.core.errors import InvalidModelName, LoadFailed, ModelNotFound, ModelNotReady, TooManyVersions
from app.engine.api import IndexEntry
from app.engine.catalog import Catalog, ModelEntry
from app.engine.host import Opened, VersionHost, open_version, runtime_options
from app.engine.served import Scan, ServedModel, ServedVersion, fingerprint
from app.engine.threads import DeadlineExceeded, NamedLocks, OwnThreads
from app.engine.types import EngineObserver, EngineSnapshot, ModelSnapshot, VersionSnapshot

logger = logging.getLogger(__name__)

# An unloading version is freed once nothing has reached it for this long (requests that resolved it just
# before it left the catalog may still submit), or after the request timeout at the latest.
UNLOAD_QUIET_S = 0.5


class RepositoryManager:
    """Which versions are served, and when: discovery, loading (each ready version gets a VersionHost,
    app/engine/host.py), polling, Triton's repository API (load, unload, index) and the catalog every
    change swaps in. `alone`, `observer` and `forecast_executor` go to the hosts it makes."""

    def __init__(
        self,
        settings: Settings,
        observer: EngineObserver | None,
        alone: Callable[[], bool],
        forecast_executor: Executor,
    ) -> None:
        self.settings = settings
        self.observer = observer
        self.alone = alone
        self.forecast_executor = forecast_executor
        self.models: dict[str, ServedModel] = {}
        self.error: str | None = None  # the repository itself is unusable
        self._options = runtime_options(settings)
        self._locks = NamedLocks()  # one load or unload of a model at a time (file reads outside them)
        self._load_threads = OwnThreads("rsa-load")  # every file read and session creation of a load
        # Models whose explicit load failed and that serve nothing: the reasons, by version (None: the
        # model's own), for the repository index. Cleared by a load that works, or an unload.
        self._failed: dict[str, dict[int | None, str]] = {}
        self._catalog = Catalog()
        self._listeners: list[Callable[[Catalog], None]] = []
        self._loader: asyncio.Task[None] | None = None

    # -- the catalog -------------------------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def on_catalog(self, listener: Callable[[Catalog], None]) -> None:
        self._listeners.append(listener)

    def _publish(self) -> None:
        """Swap in a catalog of the versions as they are now, then tell the listeners."""
        models = {
            served.name: ModelEntry(
                served.name,
                MappingProxyType({v: sv.entry() for v, sv in sorted(served.versions.items())}),
                served.error,
                served.required,
            )
            for served in self.models.values()
        }
        self._catalog = Catalog(MappingProxyType(models), self.error, self._catalog.generation + 1)
        for listener in self._listeners:
            try:
                listener(self._catalog)
            except Exception:  # a listener must never stop a load or an unload
                logger.exception("a catalog listener failed")

    # -- loading -----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Discover the repository and load it in the background; with RSA_MODEL_CONTROL=poll, rescan it
        every RSA_POLL_S from then on."""
        self.discover()
        self._loader = asyncio.get_running_loop().create_task(self._load_all(), name="load-models")

    def discover(self) -> None:
        """Find the configured models and their version folders (fast: no file is read but the policies)."""
        try:
            refs = discover(self.settings.model_repository, self.settings.models or None)
        except RepositoryError as exc:
            logger.error("%s", exc)
            self.error = str(exc)
            refs = []
        room = self.settings.max_loaded_versions
        for ref in refs:
            served = self.models[ref.name] = ServedModel(name=ref.name, error=ref.error)
            wanted, policy_error = self._wanted(ref)
            served.error = served.error or policy_error
            if len(wanted) > room:
                served.error = self._too_many(ref.name, len(wanted) - room).message
                logger.error("%s", served.error)
                wanted = wanted[len(wanted) - room :]  # the newest ones
            room -= len(wanted)
            for v in wanted:
                served.versions[v.version] = ServedVersion(name=v.model, version=v.version, path=v.path)
        self._publish()

    def _wanted(self, ref: ModelRef) -> tuple[list[VersionRef], str | None]:
        """The version folders the model's policy serves, or none and why when the policy is bad."""
        if ref.error is not None:
            return [], None
        try:
            policy = read_policy(self.settings.model_repository / ref.name)
        except PolicyError as exc:
            return [], f"model {ref.name!r}: {exc}"
        chosen = policy.select([v.version for v in ref.versions])
        return [v for v in ref.versions if v.version in chosen], None

    def _too_many(self, name: str, more: int) -> TooManyVersions:
        limit = self.settings.max_loaded_versions
        return TooManyVersions(
            f"model {name!r} was not loaded: its {more} version(s) would be over the {limit} versions a "
            f"replica holds at once (RSA_MAX_LOADED_VERSIONS; {self._held()} held now): unload a model "
            "first, or raise the setting",
            field="RSA_MAX_LOADED_VERSIONS",
            limit=limit,
        )

    def _held(self) -> int:
        """Versions that hold (or may come to hold) sessions: loading, ready, unloading, and hung loads."""
        held = sum(1 for sv in self.served_versions() if sv.state != "failed")
        return held + self._load_threads.abandoned

    async def _load_all(self) -> None:
        """Load, check and warm up every version, the newest of each model first (it is what unversioned
        requests get, and it serves as soon as it is ready); start a batcher for each one that works.
        Then, with RSA_MODEL_CONTROL=poll, watch the repository."""
        try:
            for served in list(self.models.values()):
                async with self._locks.hold(served.name, math.inf, f"loading model {served.name!r}"):
                    for sv in sorted(served.versions.values(), key=lambda v: -v.version):
                        await self._load_version(sv, time.monotonic() + self.settings.load_timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: what did load serves, and polling may still mend the rest
            logger.exception("loading the models failed")
        if self.catalog.ready:
            logger.info("all models ready: %s", ", ".join(sorted(self.models)))
        else:
            logger.error("not ready: %s", "; ".join(self.catalog.readiness_errors()))
        if self.settings.model_control == "poll":
            await self._poll()

    async def _load_version(self, sv: ServedVersion, deadline: float) -> None:
        """Read, check and warm up the version in a load thread; failed (with why) when that fails or is
        not done by `deadline` (the thread is then left to finish, and its sessions are freed)."""
        ref = VersionRef(sv.name, sv.version, sv.path)
        stamps: list[tuple[int, ...]] = []

        def read() -> Opened:
            stamps.append(fingerprint(ref.path))  # before anything is read: a change since is a retry
            return self._open(ref)

        try:
            opened = await self._load_threads.call(
                read,
                timeout_s=deadline - time.monotonic(),
                what=f"loading model {sv.name} version {sv.version}",
                cleanup=Opened.close,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            sv.fingerprint = stamps[0] if stamps else ()
            if isinstance(exc, DeadlineExceeded):
                limit = self.settings.load_timeout_s
                message = (
                    f"LoadTimeout: not loaded within RSA_LOAD_TIMEOUT_S ({limit:g} s): a file read or the "
                    "session's creation did not return"
                )
            else:
                message = f"{type(exc).__name__}: {public_message(str(exc), sv.path)}"
            logger.error("model %s version %s at %s failed to load: %s", sv.name, sv.version, sv.path, exc)
            sv.state, sv.error = "failed", message
            self._publish()
            return
        sv.fingerprint = stamps[0]
        model, manifest = opened.model, opened.manifest
        observer = self.observer.version(sv.name, sv.version, model.provider) if self.observer else None
        host = VersionHost(
            f"{sv.name}/{sv.version}", opened, self.settings, observer, self.forecast_executor, self.alone
        )
        sv.host, sv.state = host, "ready"
        self._publish()
        logger.info(
            "model %s version %s ready on %s (L=%d, H=%d, C=%d, at most %d series per session call, "
            "%.3g ms per series in a full call, measured at load)",
            sv.name,
            sv.version,
            model.provider,
            manifest.input_length,
            manifest.horizon,
            manifest.n_channels,
            host.batcher.max_batch_rows,
            1e3 * opened.seconds_per_row,
        )

    def _open(self, ref: VersionRef) -> Opened:
        """A version's files read and its sessions made (blocking, in a load thread): app/engine/host.py."""
        return open_version(ref, self.settings, self._options)

    async def stop(self, drain_timeout_s: float) -> None:
        """Stop loading and polling; drain and stop every batcher (queued requests still run, for up to
        `drain_timeout_s`)."""
        if self._loader is not None:
            self._loader.cancel()
            await asyncio.gather(self._loader, return_exceptions=True)
        batchers = [sv.batcher for sv in self.served_versions() if sv.batcher]
        await asyncio.gather(*(b.stop(drain_timeout_s) for b in batchers), return_exceptions=True)

    def get(self, name: str, version: int | None = None) -> ServedVersion:
        """A ready version as the engine holds it (the latest when `version` is None), or a domain error."""
        entry = self.catalog.resolve(name, version, self.settings.retry_after_s)
        return self.models[entry.name].versions[entry.version]

    def served_versions(self) -> Iterator[ServedVersion]:
        for served in self.models.values():
            yield from served.versions.values()

    def snapshot(self) -> EngineSnapshot:
        """The served versions' state now (what the metrics read at scrape time)."""
        return EngineSnapshot(
            self.error,
            ort.__version__,
            tuple(
                ModelSnapshot(
                    served.name,
                    served.error,
                    tuple(
                        VersionSnapshot(
                            sv.name,
                            sv.version,
                            sv.state,
                            sv.host.serving() if sv.state == "ready" and sv.host is not None else None,
                        )
                        for sv in served.versions.values()
                    ),
                )
                for served in self.models.values()
            ),
        )

    # -- the model repository ------------------------------------------------------------------------

    async def _poll(self) -> None:
        """RSA_MODEL_CONTROL=poll: every RSA_POLL_S, every model as its folder and policy say now."""
        while True:
            await asyncio.sleep(self.settings.poll_s)
            try:
                names = self.settings.models or await self._load_threads.call(
                    model_names,
                    self.settings.model_repository,
                    timeout_s=self.settings.load_timeout_s,
                    what="listing the model repository",
                )
            except DeadlineExceeded as exc:
                logger.error("rescanning the repository: %s", exc)
                continue
            if self.error is not None and names and not self.settings.models:
                # The repository was missing or empty at start-up and holds models now (serve.sh before
                # the first export): its error no longer holds readiness back; its models' own states do.
                logger.info("the model repository holds models now: %s", ", ".join(names))
                self.error = None
                self._publish()
            for name in dict.fromkeys([*names, *self.models]):
                deadline = time.monotonic() + self.settings.load_timeout_s
                try:
                    async with self._locks.hold(name, self.settings.load_timeout_s, f"rescanning {name!r}"):
                        await self._reconcile(name, deadline, explicit=False)
                except asyncio.CancelledError:
                    raise
                except NameRefused as exc:  # an RSA_MODELS name the rule refuses: said at start-up
                    logger.debug("model %r is not rescanned: %s", name, exc)
                except Exception:  # one model's trouble never stops the watch
                    logger.exception("rescanning model %s failed", name)

    def _scan(self, name: str) -> Scan:
        """The model's folder now (in a load thread: every file read of a load is there)."""
        repository = self.settings.model_repository
        folder = model_folder(repository, name)  # NameRefused: a symlink out of the repository
        ref = read_model(repository, name)
        wanted, policy_error = self._wanted(ref)
        return Scan(
            ref=ref,
            exists=folder.is_dir(),
            wanted={v.version: v for v in wanted},
            policy_error=policy_error,
            fingerprints={v.version: fingerprint(v.path) for v in wanted},
        )

    async def _reconcile(self, name: str, deadline: float, *, explicit: bool) -> None:
        """Serve what the model's folder and policy say now: new versions loaded beside the served ones
        (`latest` moves once one is ready), versions gone from the folder or the policy unloaded. A failed
        version is tried again on an explicit load, or when its folder changed. A model whose folder is
        gone is unloaded (an explicit load of it is refused instead); a model whose folder or policy cannot
        be read keeps serving what it serves. Held under the model's lock; the files are read in load
        threads. An explicit load that would hold more than RSA_MAX_LOADED_VERSIONS versions is refused
        whole; a poll loads nothing of such a model this round."""
        scan = await self._load_threads.call(
            self._scan, name, timeout_s=deadline - time.monotonic(), what=f"reading model {name!r}'s folder"
        )
        served = self.models.get(name)
        if not scan.exists:
            if explicit:
                raise ModelNotFound(f"model {name!r} has no folder in the model repository", field="name")
            if served is not None:
                await self._unload_model(served)
            return
        if served is None and (scan.ref.error or scan.policy_error):
            if not explicit:
                return  # a folder that is not a model yet (poll): nothing to say about it
            reason = scan.policy_error or scan.ref.error or "unusable"
            failure: dict[int | None, str] = {None: reason}
            self._failed[name] = failure  # for the index; never listed as a served model
            raise LoadFailed(f"model {name!r} did not load: {reason}", field="name")
        new = [
            number
            for number in sorted(scan.wanted, reverse=True)
            if (sv := served.versions.get(number) if served is not None else None) is None
            or (sv.state == "failed" and (explicit or scan.fingerprints[number] != sv.fingerprint))
        ]
        if new and self._held() + len(new) > self.settings.max_loaded_versions:
            refusal = self._too_many(name, len(new))
            if explicit:
                raise refusal
            logger.error("%s", refusal.message)
            new = []
        if served is None:
            served = self.models[name] = ServedModel(name=name, required=False)
        has_versions = bool(served.versions) or bool(new)
        served.error = scan.policy_error or (scan.ref.error if not has_versions else None)
        loading = []
        for number in new:  # every one listed as loading at once: they count against the bound now
            vref = scan.wanted[number]
            sv = served.versions[number] = ServedVersion(name, number, vref.path, required=False)
            sv.fingerprint = scan.fingerprints[number]
            loading.append(sv)
        self._publish()
        for sv in loading:
            await self._load_version(sv, deadline)
        if scan.policy_error is None:  # a policy that cannot be read leaves the served versions be
            for number, sv in list(served.versions.items()):
                if number not in scan.wanted and sv.state in ("ready", "failed"):
                    await self._unload_version(served, sv)
        self._publish()

    async def _unload_version(self, served: ServedModel, sv: ServedVersion) -> None:
        """Stop admitting to the version (it leaves the catalog's choices at once: `latest` moves), let what
        reached it finish, then free its sessions and its metrics' series."""
        logger.info("model %s version %s unloading", sv.name, sv.version)
        sv.state = "unloading"
        self._publish()
        if sv.host is not None:
            await sv.host.close(UNLOAD_QUIET_S)
        served.versions.pop(sv.version, None)
        if self.observer is not None:
            self.observer.forget(sv.name, sv.version)
        self._publish()
        logger.info("model %s version %s unloaded", sv.name, sv.version)

    async def _unload_model(self, served: ServedModel) -> None:
        for sv in list(served.versions.values()):
            await self._unload_version(served, sv)
        self.models.pop(served.name, None)
        self._publish()

    @staticmethod
    def _check_name(name: str) -> None:
        """The repository's name rule, before anything else: the same refusal whatever the disk holds."""
        try:
            check_model_name(name)
        except NameRefused as exc:
            raise InvalidModelName(str(exc), field="name") from None

    async def load(self, name: str) -> None:
        """Triton's RepositoryModelLoad: load or reload the model from its folder, beside what is served.
        Raises InvalidModelName for a name the rule refuses, ModelNotFound without a folder,
        TooManyVersions over RSA_MAX_LOADED_VERSIONS, LoadFailed when a version it wants did not load in
        time (what was served keeps serving). A model loaded here that serves nothing after a failed load
        leaves the catalog (readiness never waits for it) and its reasons stay in the index. Loading a
        loaded model again loads only what changed: it is the same model."""
        self._check_name(name)
        deadline = time.monotonic() + self.settings.load_timeout_s
        try:
            async with self._locks.hold(name, self.settings.load_timeout_s, f"loading model {name!r}"):
                await self._reconcile(name, deadline, explicit=True)
                problems = self._settle_explicit(name)
        except NameRefused as exc:
            raise InvalidModelName(str(exc), field="name") from None
        except DeadlineExceeded as exc:
            raise LoadFailed(
                f"model {name!r} did not load: {exc} (RSA_LOAD_TIMEOUT_S {self.settings.load_timeout_s:g} s)",
                field="name",
            ) from None
        if problems:
            raise LoadFailed(f"model {name!r} did not load: {problems}", field="name")

    def _settle_explicit(self, name: str) -> str | None:
        """After an explicit load: what failed, if anything. A model not of the start-up load with no
        version ready leaves the catalog, its reasons kept for the index."""
        served = self.models.get(name)
        if served is None:
            return None
        failed: dict[int | None, str] = {
            v.version: v.error or "failed" for v in served.versions.values() if v.state == "failed"
        }
        problems = served.error or "; ".join(f"version {v}: {why}" for v, why in failed.items()) or None
        if problems and not served.required and not any(v.ready for v in served.versions.values()):
            self._failed[name] = {None: served.error} if served.error else failed
            self.models.pop(name, None)
            self._publish()
        elif not problems:
            self._failed.pop(name, None)
        return problems

    async def unload(self, name: str) -> None:
        """Triton's RepositoryModelUnload: every version of the model stops being admitted, finishes what
        it has, and is freed; the model leaves the catalog (requests for it get 404)."""
        self._check_name(name)
        try:
            async with self._locks.hold(name, self.settings.load_timeout_s, f"unloading model {name!r}"):
                self._failed.pop(name, None)
                served = self.models.get(name)
                if served is None:
                    raise ModelNotFound(f"model {name!r} is not loaded", field="name")
                await self._unload_model(served)
        except DeadlineExceeded as exc:
            raise ModelNotReady(f"model {name!r} was not unloaded: {exc}") from None

    def _disk(self) -> dict[str, ModelRef]:
        """Every model folder of the repository and its versions (in a load thread)."""
        repository = self.settings.model_repository
        return {name: read_model(repository, name) for name in model_names(repository)}

    async def index(self, ready_only: bool = False) -> list[IndexEntry]:
        """Triton's RepositoryIndex: every version on disk or served, with its state (READY, LOADING,
        UNLOADING, UNAVAILABLE) and why (a failed explicit load's reasons included). The disk is read in a
        load thread; a repository that does not answer in time leaves the served versions only."""
        try:
            disk = await self._load_threads.call(
                self._disk, timeout_s=self.settings.load_timeout_s, what="reading the model repository"
            )
        except DeadlineExceeded as exc:
            logger.error("the repository index: %s", exc)
            disk = {}
        entries: list[IndexEntry] = []
        for name in sorted({*disk, *self.models}):
            served = self.models.get(name)
            ref = disk.get(name)
            failed = self._failed.get(name, {})
            on_disk = {v.version for v in ref.versions} if ref is not None else set()
            numbers = sorted(on_disk | set(served.versions if served else ()))
            if not numbers:
                reason = (
                    (served.error if served else None)
                    or failed.get(None)
                    or (ref.error if ref is not None else None)
                    or "no version folder"
                )
                entries.append(IndexEntry(name, None, "UNAVAILABLE", reason))
                continue
            for number in numbers:
                sv = served.versions.get(number) if served else None
                if sv is None:
                    if served is None:
                        why = failed.get(number) or failed.get(None) or "not loaded"
                    else:
                        why = served.error or "not selected by its version policy"
                    entries.append(IndexEntry(name, number, "UNAVAILABLE", why))
                else:
                    state = {"ready": "READY", "loading": "LOADING", "unloading": "UNLOADING"}.get(
                        sv.state, "UNAVAILABLE"
                    )
                    entries.append(IndexEntry(name, number, state, sv.error or ""))
        return [e for e in entries if e.state == "READY"] if ready_only else entries
