"""Find plugins through entry points, load them lazily and build them from options.

Plugins are ordinary packages that declare entry points in one of five groups
(``ctxeval.metrics``, ``ctxeval.extractors``, ``ctxeval.matchers``, ``ctxeval.llms``,
``ctxeval.writers``)::

    [project.entry-points."ctxeval.metrics"]
    my_metric = "my_package.metrics:MyMetric"

The target is a *factory*: a class (or any callable) that takes the plugin's options as
keyword arguments and returns the plugin. Entry points are read with
:mod:`importlib.metadata` (not the ``entrypoints`` package, which is in maintenance mode and
whose own README sends new code to ``importlib.metadata``).

Rules:

* Nothing is imported until a plugin is used (or :meth:`Registry.plugins` is asked for its
  status).
* A plugin that fails to import or load is reported with its error and does not hide the others.
* Two distributions claiming one name is an error that names both.
* A plugin whose optional dependency is missing (its class lists
  :class:`~ctxeval._plugins.base.Dependency`
  objects in ``dependencies``) is *unavailable*, with the command that installs it.
* Two names with the same target in one distribution are one plugin: the name equal to the
  plugin's ``registry_name`` is canonical and the others are aliases (``context_recall`` for
  ``llm_context_recall``).

Each :class:`Registry` is independent; the shared default one (:func:`default_registry`) is
read-only, so tests and harnesses register their own plugins on a :meth:`Registry.copy`.

A plugin built from options may need other plugins (``context_entity_recall`` binds an extractor
and a matcher): while a factory runs, :func:`building_registry` is the registry building it, so
its parts come from the same registry, bound once.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from ctxeval._data.measure_names import parse_ir_name
from ctxeval._errors import (
    ConfigError,
    CtxevalError,
    MissingExtraError,
    PluginConflictError,
    PluginError,
    UnknownNameError,
    plugin_kind,
)
from ctxeval._plugins.base import Dependency, options_of
from ctxeval._plugins.optional import is_installed
from ctxeval._plugins.protocols import Extractor, LLMProvider, Matcher, Metric, Writer

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "EXTRACTORS",
    "GROUPS",
    "LLMS",
    "MATCHERS",
    "METRICS",
    "WRITERS",
    "PluginInfo",
    "Registry",
    "building_registry",
    "default_registry",
]

logger = logging.getLogger(__name__)

METRICS: Final = "ctxeval.metrics"
EXTRACTORS: Final = "ctxeval.extractors"
MATCHERS: Final = "ctxeval.matchers"
LLMS: Final = "ctxeval.llms"
WRITERS: Final = "ctxeval.writers"
GROUPS: Final = (METRICS, EXTRACTORS, MATCHERS, LLMS, WRITERS)

_PROTOCOLS: Final[dict[str, type]] = {
    METRICS: Metric,
    EXTRACTORS: Extractor,
    MATCHERS: Matcher,
    LLMS: LLMProvider,
    WRITERS: Writer,
}

_OWN_DISTRIBUTION: Final = "ctxeval"
"""Built-in plugins win a name conflict (the other claimant is reported)."""

_BUILDING: ContextVar[Registry | None] = ContextVar("ctxeval_building_registry", default=None)

PluginStatus = Literal["ok", "unavailable", "broken", "conflict"]


@attrs.frozen(slots=True)
class PluginInfo:
    """One registered plugin name and its state, as :func:`ctxeval.plugins` lists it.

    Attributes:
        group: the entry-point group (``ctxeval.metrics``, ``ctxeval.extractors`` or
            ``ctxeval.matchers``).
        name: the name it is registered under.
        target: where it comes from (``module:attribute``, or the object registered in code).
        distribution: the installed distribution that declares it (None when registered in code).
        version: that distribution's version.
        status: ``ok``; ``unavailable`` (an optional dependency is missing, see ``install``);
            ``broken`` (it failed to load, see ``error``); ``conflict`` (another distribution
            claims the same name).
        error: what went wrong, for ``broken`` and ``conflict``.
        install: the command that makes an ``unavailable`` plugin available.
        alias_of: for an alias, the canonical name.
    """

    group: str
    name: str
    target: str
    distribution: str | None
    version: str | None
    status: PluginStatus
    error: str | None = None
    install: str | None = None
    alias_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define(slots=True, eq=False)
class _Entry:
    """One name in one group, and (once loaded) its factory or the error loading raised."""

    group: str
    name: str
    target: str
    distribution: str | None
    version: str | None
    entry_point: EntryPoint | None = None
    factory: Any = None
    load_error: BaseException | None = None
    loaded: bool = False

    def origin(self) -> str:
        where = f"distribution {self.distribution!r}" if self.distribution else "code"
        return f"{where} ({self.target})"

    def load(self) -> Any:
        """Import the factory once; re-raise the import error on every later call."""
        if not self.loaded:
            try:
                if self.entry_point is not None:
                    self.factory = self.entry_point.load()
                elif isinstance(self.factory, str):
                    self.factory = _import_target(self.factory)
            except (Exception, SystemExit) as exc:  # a broken plugin (even one calling
                # sys.exit at import) must not take the others down
                self.load_error = exc
                logger.debug("plugin %s:%s failed to load", self.group, self.name, exc_info=True)
            self.loaded = True
        if self.load_error is not None:
            raise _load_failure(self, self.load_error) from self.load_error
        return self.factory


def _import_target(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attribute.split(".")):
        obj = getattr(obj, part)
    return obj


def _load_failure(entry: _Entry, exc: BaseException) -> PluginError:
    kind = plugin_kind(entry.group)
    message = (
        f"{kind} {entry.name!r} from {entry.origin()} failed to load: {type(exc).__name__}: {exc}"
    )
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        return MissingExtraError(message, install=f"pip install {top}")
    return PluginError(message)


def _missing(dependencies: Iterable[Dependency]) -> list[Dependency]:
    return [d for d in dependencies if not is_installed(d.module)]


class Registry:
    """A set of named plugin factories in the three groups.

    Build one with :meth:`from_entry_points` (what is installed) or empty, then
    :meth:`register` more in code.
    """

    def __init__(self, *, read_only: bool = False) -> None:
        self._entries: dict[str, dict[str, list[_Entry]]] = {group: {} for group in GROUPS}
        self._read_only = read_only

    # --- building -------------------------------------------------------------------------

    @classmethod
    def from_entry_points(cls, *, read_only: bool = False) -> Registry:
        """A registry of every plugin installed in this environment."""
        import importlib.metadata  # imported here: it costs a third of `import ctxeval`

        registry = cls()
        all_points = importlib.metadata.entry_points()
        seen: set[tuple[str, str, str | None, str]] = set()
        described: dict[int, tuple[str | None, str | None]] = {}  # each METADATA parsed once
        for group in GROUPS:
            for point in all_points.select(group=group):
                dist = getattr(point, "dist", None)
                if dist is None:
                    dist_name = version = None
                elif id(dist) in described:
                    dist_name, version = described[id(dist)]
                else:
                    metadata = dist.metadata
                    dist_name, version = metadata["Name"], metadata["Version"]
                    described[id(dist)] = (dist_name, version)
                key = (group, point.name, dist_name, point.value)
                if key in seen:  # the same distribution found twice on sys.path
                    continue
                seen.add(key)
                registry._add(
                    _Entry(
                        group=group,
                        name=point.name,
                        target=point.value,
                        distribution=dist_name,
                        version=version,
                        entry_point=point,
                    )
                )
        registry._read_only = read_only
        return registry

    def copy(self) -> Registry:
        """A writable registry with the same plugins (loaded factories are shared)."""
        new = Registry()
        for group, names in self._entries.items():
            new._entries[group] = {name: list(entries) for name, entries in names.items()}
        return new

    def register(
        self,
        group: str,
        name: str,
        factory: Callable[..., Any] | str,
        *,
        replace: bool = False,
    ) -> None:
        """Register ``factory`` (or a ``"module:attribute"`` string) under ``name``.

        Args:
            group: ``ctxeval.metrics``, ``ctxeval.extractors``, ``ctxeval.matchers`` or
                ``ctxeval.llms``.
            replace: drop what is registered under the name instead of making a conflict.

        Raises:
            ConfigError: the registry is read-only (the default one: use :meth:`copy`), the
                group is unknown, or the name is taken and ``replace`` is False.
        """
        if self._read_only:
            raise ConfigError(
                "the default registry is read-only; register on a copy: "
                "registry = ctxeval.default_registry().copy()"
            )
        self._check_group(group)
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"a plugin name must be an identifier, got {name!r}")
        if name in self._entries[group] and not replace:
            taken = self._entries[group][name][0]
            raise ConfigError(
                f"{group}: {name!r} is already registered by {taken.origin()}; "
                "pass replace=True to override it"
            )
        target = factory if isinstance(factory, str) else _describe(factory)
        entry = _Entry(group, name, target, None, None)
        if isinstance(factory, str):
            entry.factory = factory
        else:
            entry.factory = factory
            entry.loaded = True
        self._entries[group][name] = [entry]

    def register_metric(self, name: str, factory: Callable[..., Any] | str) -> None:
        """Shortcut for ``register("ctxeval.metrics", name, factory)``."""
        self.register(METRICS, name, factory)

    def _add(self, entry: _Entry) -> None:
        self._entries[entry.group].setdefault(entry.name, []).append(entry)

    def _check_group(self, group: str) -> None:
        if group not in self._entries:
            raise ConfigError(f"unknown plugin group {group!r}; use one of {', '.join(GROUPS)}")

    # --- looking up -----------------------------------------------------------------------

    def names(self, group: str = METRICS) -> list[str]:
        """Every name registered in ``group``, sorted (aliases included)."""
        self._check_group(group)
        return sorted(self._entries[group])

    def __contains__(self, item: tuple[str, str]) -> bool:
        group, name = item
        return name in self._entries.get(group, {})

    def load(self, group: str, name: str) -> Any:
        """The factory registered under ``name``, imported on first use.

        Raises:
            UnknownNameError: nothing has that name (the message suggests close names).
            PluginConflictError: two distributions claim the name.
            PluginError: the plugin failed to import or load.
            MissingExtraError: it needs an optional dependency that is not installed.
        """
        entry = self._entry(group, name)
        factory = entry.load()
        missing = _missing(getattr(factory, "dependencies", ()))
        if missing:
            kind = plugin_kind(group)
            modules = ", ".join(d.module for d in missing)
            raise MissingExtraError(
                f"{kind} {name!r} needs {modules}, which is not installed",
                install=missing[0].install,
            )
        return factory

    def factory(self, group: str, name: str, /) -> Any:
        """The factory registered under ``name``, imported, without checking its optional
        dependencies (to read its ``requires`` or options); raises as :meth:`load` does."""
        return self._entry(group, name).load()

    def create(self, group: str, name: str, /, **options: Any) -> Any:
        """Build the plugin ``name`` of ``group`` with ``options``.

        Raises:
            ConfigError: an option is unknown or has a bad value (the message lists the
                accepted options).
            and what :meth:`load` raises.
        """
        factory = self.load(group, name)
        kind = plugin_kind(group)
        accepted = options_of(factory)
        if accepted is not None:
            unknown = sorted(set(options) - set(accepted))
            if unknown:
                hints = []
                for option in unknown:
                    close = difflib.get_close_matches(option, accepted, n=1)
                    hints.append(
                        f"{option!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                    )
                raise ConfigError(
                    f"{kind} {name!r} has no option {', '.join(hints)}; its options are: "
                    f"{', '.join(accepted) or '(none)'}"
                )
        token = _BUILDING.set(self)
        try:
            plugin = factory(**options)
        except CtxevalError:
            raise  # already says what is wrong (a part that is unknown, an extra missing)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{kind} {name!r}: bad option: {exc}") from exc
        finally:
            _BUILDING.reset(token)
        protocol = _PROTOCOLS[group]
        if not isinstance(plugin, protocol):
            raise PluginError(
                f"{kind} {name!r} from {self._entry(group, name).origin()} built a "
                f"{type(plugin).__name__}, which is not a {protocol.__name__} "
                f"(see ctxeval.plugin.{protocol.__name__})"
            )
        return plugin

    def get_metric(self, name: str, /, **options: Any) -> Metric:
        """Build the metric registered under ``name`` (or an alias) with ``options``.

        An IR measure name as ir_measures or ranx write it (``nDCG@10``, ``P@5``, ``AP``,
        ``mrr``; see :mod:`ctxeval._data.measure_names`) stands for the ID metric it names, and its
        rows carry the name as written.
        """
        if name not in self._entries[METRICS]:
            try:
                parsed = parse_ir_name(name)
            except ValueError as exc:
                raise ConfigError(f"metric {name!r}: {exc}") from None
            if parsed is not None:
                metric, implied = parsed
                name, options = metric, {**implied, **options}
        plugin: Metric = self.create(METRICS, name, **options)
        return plugin

    def knows_metric(self, name: str) -> bool:
        """Whether ``name`` is a registered metric name or an IR measure name."""
        if name in self._entries[METRICS]:
            return True
        try:
            return parse_ir_name(name) is not None
        except ValueError:
            return True  # a measure name missing its cut-off: get_metric says so

    def get_extractor(self, name: str, /, **options: Any) -> Extractor:
        """Build the extractor registered under ``name`` with ``options``."""
        plugin: Extractor = self.create(EXTRACTORS, name, **options)
        return plugin

    def get_matcher(self, name: str, /, **options: Any) -> Matcher:
        """Build the matcher registered under ``name`` with ``options``."""
        plugin: Matcher = self.create(MATCHERS, name, **options)
        return plugin

    def get_llm_provider(self, name: str, /, **options: Any) -> LLMProvider:
        """Build the LLM provider registered under ``name`` with ``options``."""
        plugin: LLMProvider = self.create(LLMS, name, **options)
        return plugin

    def get_writer(self, name: str, /, **options: Any) -> Writer:
        """Build the writer registered under ``name`` with ``options``."""
        plugin: Writer = self.create(WRITERS, name, **options)
        return plugin

    def _entry(self, group: str, name: str) -> _Entry:
        self._check_group(group)
        entries = self._entries[group].get(name)
        if not entries:
            known = list(self._entries[group])
            raise UnknownNameError(
                group, name, known, difflib.get_close_matches(name, known, n=2, cutoff=0.6)
            )
        if len(entries) > 1:
            own = [e for e in entries if e.distribution == _OWN_DISTRIBUTION]
            if len(own) == 1:
                # a package claiming a built-in name does not take the built-in away
                logger.warning("%s; using ctxeval's own", _conflict_message(group, name, entries))
                return own[0]
            raise PluginConflictError(_conflict_message(group, name, entries))
        return entries[0]

    # --- reporting ------------------------------------------------------------------------

    def plugins(self) -> list[PluginInfo]:
        """Every registered name with its state; loads each plugin to find out.

        A plugin that fails is reported, never raised.
        """
        infos: list[PluginInfo] = []
        for group in GROUPS:
            canonical = self._canonical_names(group)
            for name in sorted(self._entries[group]):
                entries = self._entries[group][name]
                for entry in entries:
                    infos.append(
                        self._info(
                            entry, entries, canonical.get((entry.target, entry.distribution))
                        )
                    )
        return infos

    def _canonical_names(self, group: str) -> dict[tuple[str, str | None], str]:
        """For targets registered under several names: the name that is canonical."""
        by_target: dict[tuple[str, str | None], list[_Entry]] = {}
        for entries in self._entries[group].values():
            for entry in entries:
                by_target.setdefault((entry.target, entry.distribution), []).append(entry)
        canonical = {}
        for key, entries in by_target.items():
            if len(entries) < 2:
                continue
            try:
                factory = entries[0].load()
            except PluginError:
                continue
            own = getattr(factory, "registry_name", None)
            if own in {e.name for e in entries}:
                canonical[key] = own
        return canonical

    def _info(self, entry: _Entry, rivals: list[_Entry], canonical: str | None) -> PluginInfo:
        info = PluginInfo(
            group=entry.group,
            name=entry.name,
            target=entry.target,
            distribution=entry.distribution,
            version=entry.version,
            status="ok",
            alias_of=canonical if canonical is not None and canonical != entry.name else None,
        )
        if len(rivals) > 1:
            error = _conflict_message(entry.group, entry.name, rivals)
            own = [e for e in rivals if e.distribution == _OWN_DISTRIBUTION]
            if not (len(own) == 1 and own[0] is entry):
                return attrs.evolve(info, status="conflict", error=error)
            info = attrs.evolve(info, error=f"{error}; ctxeval's own is used")
        try:
            factory = entry.load()
        except PluginError as exc:
            install = exc.install if isinstance(exc, MissingExtraError) else None
            return attrs.evolve(info, status="broken", error=str(exc), install=install)
        missing = _missing(getattr(factory, "dependencies", ()))
        if missing:
            return attrs.evolve(
                info,
                status="unavailable",
                error=f"needs {', '.join(d.module for d in missing)}",
                install=missing[0].install,
            )
        return info


def _conflict_message(group: str, name: str, entries: list[_Entry]) -> str:
    claimants = " and ".join(e.origin() for e in entries)
    return (
        f"{group}: the name {name!r} is claimed by {claimants}; uninstall one of them, "
        "or register the one you want on a registry copy"
    )


def _describe(factory: object) -> str:
    module = getattr(factory, "__module__", None) or "?"
    qualname = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return f"{module}:{qualname}"


@functools.cache
def default_registry() -> Registry:
    """The read-only registry of every installed plugin, built once per process."""
    return Registry.from_entry_points(read_only=True)


def building_registry() -> Registry:
    """The registry whose factory is running now (a plugin being built resolves its parts
    there), else :func:`default_registry`."""
    return _BUILDING.get() or default_registry()
