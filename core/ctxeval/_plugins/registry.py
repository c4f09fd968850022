"""The registry: find plugins through entry points, load them lazily and build them from
options (:class:`Registry`, :func:`default_registry`, :func:`building_registry`).

Plugins are ordinary packages that declare entry points in one of five groups
(``ctxeval.metrics``, ``ctxeval.extractors``, ``ctxeval.matchers``, ``ctxeval.llms``,
``ctxeval.writers``, ``ctxeval.runners``)::

    [project.entry-points."ctxeval.metrics"]
    my_metric = "my_package.metrics:MyMetric"

The target is a *factory*: a class (or any callable) that takes the plugin's options as
keyword arguments and returns the plugin.

Rules:

* Nothing is imported until a plugin is used (or :meth:`Registry.plugins` is asked for its
  status).
* A plugin that fails to import or load is reported with its error and does not hide the others
  (:mod:`ctxeval._plugins.entries`).
* Two distributions claiming one name is an error that names both
  (:mod:`ctxeval._plugins.conflicts`).
* A plugin whose optional dependency is missing (its class lists
  :class:`~ctxeval._plugins.base.Dependency` objects in ``dependencies``) is *unavailable*, with
  the command that installs it (:mod:`ctxeval._plugins.status`).
* Two names with the same target in one distribution are one plugin: the name equal to the
  plugin's ``registry_name`` is canonical and the others are aliases (``context_recall`` for
  ``llm_context_recall``).

This module is the facade over them: entry points are found by :mod:`ctxeval._plugins.discovery`,
unknown names and options explained by :mod:`ctxeval._plugins.names`, IR measure names resolved
by :mod:`ctxeval._plugins.ir_aliases`.

Each :class:`Registry` is independent; the shared default one (:func:`default_registry`) is
read-only, so tests and harnesses register their own plugins on a :meth:`Registry.copy`.

A plugin built from options may need other plugins (``context_entity_recall`` binds an extractor
and a matcher): while a factory runs, :func:`building_registry` is the registry building it, so
its parts come from the same registry, bound once (:mod:`ctxeval._plugins.building`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from ctxeval._errors import ConfigError, CtxevalError, MissingExtraError, PluginError, plugin_kind
from ctxeval._plugins.base import BaseMetric, options_of
from ctxeval._plugins.building import building, current
from ctxeval._plugins.conflicts import choose
from ctxeval._plugins.discovery import installed_entries
from ctxeval._plugins.entries import Entry, describe
from ctxeval._plugins.groups import (
    EMBEDDERS,
    EXTRACTORS,
    GROUPS,
    LLMS,
    MATCHERS,
    METRICS,
    PROTOCOLS,
    RUNNERS,
    TRACES,
    WRITERS,
)
from ctxeval._plugins.hooks import HasRegistryName, check_hook_signatures
from ctxeval._plugins.ir_aliases import is_ir_name, resolve_ir_name
from ctxeval._plugins.names import (
    check_options,
    one_by_case,
    suggest_metric_names,
    unknown_name,
)
from ctxeval._plugins.protocols import (
    Embedder,
    Extractor,
    LLMProvider,
    Matcher,
    Metric,
    RunnerPlugin,
    TraceReader,
    Writer,
)
from ctxeval._plugins.status import (
    PluginInfo,
    canonical_names,
    info_of,
    missing_dependencies,
)

__all__ = [
    "EXTRACTORS",
    "GROUPS",
    "LLMS",
    "MATCHERS",
    "METRICS",
    "RUNNERS",
    "WRITERS",
    "PluginInfo",
    "Registry",
    "building_registry",
    "default_registry",
]


class Registry:
    """A set of named plugin factories in the three groups.

    Build one with :meth:`from_entry_points` (what is installed) or empty, then
    :meth:`register` more in code.
    """

    def __init__(self, *, read_only: bool = False) -> None:
        self._entries: dict[str, dict[str, list[Entry]]] = {group: {} for group in GROUPS}
        self._read_only = read_only
        self._hooks_checked: set[type] = set()  # the plugin classes whose hooks were checked

    # --- building -------------------------------------------------------------------------

    @classmethod
    def from_entry_points(cls, *, read_only: bool = False) -> Registry:
        """A registry of every plugin installed in this environment."""
        registry = cls()
        for entry in installed_entries():
            registry._add(entry)
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
        target = factory if isinstance(factory, str) else describe(factory)
        entry = Entry(group, name, target, None, None)
        if isinstance(factory, str):
            entry.factory = factory
        else:
            entry.factory = factory
            entry.loaded = True
        self._entries[group][name] = [entry]

    def register_metric(self, name: str, factory: Callable[..., Any] | str) -> None:
        """Shortcut for ``register("ctxeval.metrics", name, factory)``."""
        self.register(METRICS, name, factory)

    def _add(self, entry: Entry) -> None:
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
        missing = missing_dependencies(factory)
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
            check_options(kind, name, options, accepted)
        try:
            with building(self):
                plugin = factory(**options)
        except CtxevalError:
            raise  # already says what is wrong (a part that is unknown, an extra missing)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{kind} {name!r}: bad option: {exc}") from exc
        protocol = PROTOCOLS[group]
        if not isinstance(plugin, protocol):
            raise PluginError(
                f"{kind} {name!r} from {self._entry(group, name).origin()} built a "
                f"{type(plugin).__name__}, which is not a {protocol.__name__} "
                f"(see ctxeval.plugin.{protocol.__name__})"
            )
        if type(plugin) not in self._hooks_checked:  # (once per class: a class's methods)
            where = f"{kind} {name!r} from {self._entry(group, name).origin()}"
            check_hook_signatures(plugin, group, where)
            self._hooks_checked.add(type(plugin))
        return plugin

    def get_metric(self, name: str, /, **options: Any) -> Metric:
        """Build the metric registered under ``name`` (or an alias) with ``options``.

        An IR measure name as ir_measures or ranx write it (``nDCG@10``, ``P@5``, ``AP``,
        ``mrr``; see :mod:`ctxeval._data.measure_names`) stands for the ID metric it names; a
        registered name is found in any case when only one matches.

        The metric's rows carry the name as written (an alias stays the alias, an IR name
        keeps its spelling; see :mod:`ctxeval._plugins.metric_names`) unless ``options``
        names them (``name=``).

        Raises:
            UnknownNameError: no metric has the name (with the close names, IR ones too).
            ConfigError: a bad option; and what :meth:`create` raises.
        """
        written = name
        registered = self._entries[METRICS]
        if name not in registered:
            by_case = one_by_case(name, registered)
            if by_case is not None:
                name = written = by_case  # another case of a registered name: that name
            else:
                name, options = resolve_ir_name(name, options)
                if name not in registered:
                    close = suggest_metric_names(written, registered)
                    raise unknown_name(METRICS, written, list(registered), close)
        plugin: Metric = self.create(METRICS, name, **options)
        if "name" not in options:
            plugin = self._named(plugin, name, written, options)
        return plugin

    def _named(self, plugin: Metric, name: str, written: str, options: dict[str, Any]) -> Metric:
        """``plugin`` (built from the registered ``name``) with its rows named as ``written``,
        when that is an alias (or another case) of the plugin's own name and it takes the
        ``name`` option. A :class:`~ctxeval.plugin.BaseMetric` is built once: a copy takes the
        name, as its ``__attrs_post_init__`` gives a name (its parts are not built again);
        another plugin is built again with ``name=``."""
        own = plugin.registry_name if isinstance(plugin, HasRegistryName) else None
        if not own or written == own or plugin.name == written:
            return plugin
        if "name" not in (options_of(self.load(METRICS, name)) or ()):
            return plugin  # a plugin that cannot be renamed keeps its own names
        if not plugin.name.startswith(own):
            return plugin  # a default name that is no prefix-and-parameters: left as it is
        renamed = written + plugin.name[len(own) :]
        if isinstance(plugin, BaseMetric):
            named = copy.copy(plugin)
            object.__setattr__(named, "name", renamed)  # (frozen: as BaseMetric names itself)
            return named
        built: Metric = self.create(METRICS, name, **options, name=renamed)
        return built

    def knows_metric(self, name: str) -> bool:
        """Whether ``name`` is a registered metric name or an IR measure name."""
        return name in self._entries[METRICS] or is_ir_name(name)

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

    def get_runner(self, name: str, /, **options: Any) -> RunnerPlugin:
        """Build the runner ``name`` (``local``, ``processes``, ``ray``, or a third party's)
        with ``options`` (e.g. ``workers=4``)."""
        runner: RunnerPlugin = self.create(RUNNERS, name, **options)
        return runner

    def get_embedder(self, name: str, /, **options: Any) -> Embedder:
        """Build the embedder registered under ``name`` with ``options``."""
        embedder: Embedder = self.create(EMBEDDERS, name, **options)
        return embedder

    def get_trace_reader(self, name: str, /, **options: Any) -> TraceReader:
        """Build the trace reader registered under ``name`` (``openinference``, ``mlflow``...)
        with ``options``."""
        reader: TraceReader = self.create(TRACES, name, **options)
        return reader

    def _entry(self, group: str, name: str) -> Entry:
        self._check_group(group)
        entries = self._entries[group].get(name)
        if not entries:
            raise unknown_name(group, name, list(self._entries[group]))
        return choose(group, name, entries)

    # --- reporting ------------------------------------------------------------------------

    def plugins(self) -> list[PluginInfo]:
        """Every registered name with its state; loads each plugin to find out.

        A plugin that fails is reported, never raised.
        """
        infos: list[PluginInfo] = []
        for group in GROUPS:
            canonical = canonical_names(self._entries[group].values())
            for name in sorted(self._entries[group]):
                entries = self._entries[group][name]
                for entry in entries:
                    infos.append(
                        info_of(entry, entries, canonical.get((entry.target, entry.distribution)))
                    )
        return infos


@functools.cache
def default_registry() -> Registry:
    """The read-only registry of every installed plugin, built once per process."""
    return Registry.from_entry_points(read_only=True)


def building_registry() -> Registry:
    """The registry whose factory is running now (a plugin being built resolves its parts
    there), else :func:`default_registry`."""
    found = current()
    return found if isinstance(found, Registry) else default_registry()
