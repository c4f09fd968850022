"""The registry over real entry points: lazy loading, broken plugins, conflicts, extras."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxeval
from ctxeval import (
    ConfigError,
    MissingExtraError,
    PluginConflictError,
    PluginError,
    Registry,
    UnknownNameError,
)

BUILT_IN_METRICS = {
    "non_llm_context_precision_with_reference",
    "non_llm_context_recall",
    "id_based_context_precision",
    "id_based_context_recall",
    "id_precision_at_k",
    "id_recall_at_k",
    "id_hit_rate_at_k",
    "id_mrr",
    "id_average_precision",
    "id_ndcg_at_k",
}

GOOD_MODULE = """
import attrs
from ctxeval import MetricResult
from ctxeval._plugins.base import BaseDeterministicMetric

@attrs.frozen(kw_only=True)
class AlphaMetric(BaseDeterministicMetric):
    registry_name = "alpha_metric"
    requires = ("reference",)
    def score(self, sample):
        return MetricResult.ok(1.0)

def not_a_metric():
    return object()
"""

EXTRA_MODULE = """
import attrs
from ctxeval import MetricResult
from ctxeval._plugins.base import BaseDeterministicMetric, Dependency

@attrs.frozen(kw_only=True)
class Fancy(BaseDeterministicMetric):
    registry_name = "needs_extra"
    dependencies = (
        Dependency("surely_not_installed_module_xyz", "pip install 'needs-extra[fancy]'"),
    )
    def score(self, sample):
        return MetricResult.ok(1.0)
"""


def fake_distribution(site: Path, name: str, entry_points: str) -> None:
    dist_info = site / f"{name.replace('-', '_')}-1.2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (dist_info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    (site / "regtest_alpha.py").write_text(GOOD_MODULE)
    (site / "regtest_extra.py").write_text(EXTRA_MODULE)
    (site / "regtest_broken.py").write_text("raise RuntimeError('boom at import')\n")
    (site / "regtest_rival.py").write_text(GOOD_MODULE)
    fake_distribution(
        site,
        "alpha-plugin",
        """
        [ctxeval.metrics]
        alpha_metric = regtest_alpha:AlphaMetric
        alpha_alias = regtest_alpha:AlphaMetric
        not_a_metric = regtest_alpha:not_a_metric
        """,
    )
    fake_distribution(
        site, "broken-import", "[ctxeval.metrics]\nbroken_import = regtest_broken:X\n"
    )
    fake_distribution(
        site, "broken-attr", "[ctxeval.metrics]\nmissing_attr = regtest_alpha:DoesNotExist\n"
    )
    fake_distribution(
        site, "missing-module", "[ctxeval.extractors]\nghost = regtest_no_such_module:X\n"
    )
    fake_distribution(site, "needs-extra", "[ctxeval.metrics]\nneeds_extra = regtest_extra:Fancy\n")
    fake_distribution(
        site, "rival-a", "[ctxeval.matchers]\nshared_name = regtest_rival:AlphaMetric\n"
    )
    (site / "regtest_exits.py").write_text("import sys\nsys.exit(3)\n")
    fake_distribution(site, "exits-at-import", "[ctxeval.metrics]\nexiter = regtest_exits:X\n")
    fake_distribution(site, "hijacker", "[ctxeval.metrics]\nid_mrr = regtest_alpha:AlphaMetric\n")
    fake_distribution(
        site, "rival-b", "[ctxeval.matchers]\nshared_name = regtest_rival:not_a_metric\n"
    )
    return site


@pytest.fixture
def fake_registry(site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    monkeypatch.syspath_prepend(str(site))
    for module in [m for m in sys.modules if m.startswith("regtest_")]:
        monkeypatch.delitem(sys.modules, module)
    return Registry.from_entry_points()


def test_built_ins_are_registered_through_entry_points() -> None:
    registry = ctxeval.default_registry()
    assert set(registry.names()) >= BUILT_IN_METRICS
    infos = {(p.group, p.name): p for p in ctxeval.plugins()}
    for name in BUILT_IN_METRICS:
        info = infos["ctxeval.metrics", name]
        assert info.status == "ok", info
        assert info.distribution == "ctxeval"
        assert info.version == ctxeval.__version__
    assert infos["ctxeval.matchers", "similarity"].status == "ok"
    assert infos["ctxeval.matchers", "id"].status == "ok"


def test_loading_is_lazy(fake_registry: Registry) -> None:
    assert "regtest_alpha" not in sys.modules
    assert "alpha_metric" in fake_registry.names()
    assert "regtest_alpha" not in sys.modules
    metric = fake_registry.get_metric("alpha_metric")
    assert "regtest_alpha" in sys.modules
    assert metric.name == "alpha_metric"


def test_broken_plugins_are_reported_and_do_not_hide_the_others(fake_registry: Registry) -> None:
    infos = {(p.group, p.name): p for p in fake_registry.plugins()}
    broken = infos["ctxeval.metrics", "broken_import"]
    assert broken.status == "broken"
    assert broken.distribution == "broken-import"
    assert broken.version == "1.2.3"
    assert "RuntimeError: boom at import" in (broken.error or "")
    assert infos["ctxeval.metrics", "missing_attr"].status == "broken"
    ghost = infos["ctxeval.extractors", "ghost"]
    assert ghost.status == "broken"
    assert ghost.install == "pip install regtest_no_such_module"
    # every other plugin still works
    assert infos["ctxeval.metrics", "alpha_metric"].status == "ok"
    for name in BUILT_IN_METRICS:
        assert infos["ctxeval.metrics", name].status == "ok"
    evaluation = ctxeval.evaluate(
        [{"reference": "r", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}],
        metrics=["alpha_metric", "id_mrr"],
        registry=fake_registry,
    )
    assert [r.score for r in evaluation.results] == [1.0, 1.0]


def test_loading_a_broken_plugin_raises_a_clear_error(fake_registry: Registry) -> None:
    with pytest.raises(
        PluginError,
        match=(
            r"metric 'broken_import' from distribution 'broken-import' "
            r"\(regtest_broken:X\) failed to load: RuntimeError: boom"
        ),
    ):
        fake_registry.get_metric("broken_import")
    with pytest.raises(PluginError, match="AttributeError"):
        fake_registry.get_metric("missing_attr")
    with pytest.raises(MissingExtraError, match="pip install regtest_no_such_module"):
        fake_registry.get_extractor("ghost")


def test_a_missing_extra_shows_unavailable_with_its_install_command(
    fake_registry: Registry,
) -> None:
    [info] = [p for p in fake_registry.plugins() if p.name == "needs_extra"]
    assert info.status == "unavailable"
    assert info.install == "pip install 'needs-extra[fancy]'"
    assert "surely_not_installed_module_xyz" in (info.error or "")
    with pytest.raises(MissingExtraError) as error:
        fake_registry.get_metric("needs_extra")
    assert error.value.install == "pip install 'needs-extra[fancy]'"
    assert "install it with: pip install 'needs-extra[fancy]'" in str(error.value)
    assert isinstance(error.value, ImportError)


def test_a_name_claimed_twice_names_both_distributions(fake_registry: Registry) -> None:
    with pytest.raises(PluginConflictError) as error:
        fake_registry.get_matcher("shared_name")
    message = str(error.value)
    assert "'rival-a'" in message
    assert "'rival-b'" in message
    statuses = [p.status for p in fake_registry.plugins() if p.name == "shared_name"]
    assert statuses == ["conflict", "conflict"]


def test_aliases_share_one_plugin(fake_registry: Registry) -> None:
    infos = {p.name: p for p in fake_registry.plugins() if p.group == "ctxeval.metrics"}
    assert infos["alpha_alias"].alias_of == "alpha_metric"
    assert infos["alpha_metric"].alias_of is None
    # one plugin, and its rows carry the name as written
    alias = fake_registry.get_metric("alpha_alias")
    canonical = fake_registry.get_metric("alpha_metric")
    assert type(alias) is type(canonical)
    assert (alias.name, canonical.name) == ("alpha_alias", "alpha_metric")


def test_a_factory_that_builds_no_metric_is_refused(fake_registry: Registry) -> None:
    with pytest.raises(PluginError, match="not a Metric"):
        fake_registry.get_metric("not_a_metric")


def test_unknown_names_suggest_the_closest() -> None:
    with pytest.raises(
        UnknownNameError, match="did you mean 'id_based_context_precision'"
    ) as error:
        ctxeval.get_metric("id_based_context_precisoin")
    assert isinstance(error.value, LookupError)
    assert isinstance(error.value, ConfigError)
    with pytest.raises(UnknownNameError, match="known metrics: "):
        ctxeval.get_metric("zzz")


def test_bad_options_list_the_accepted_ones() -> None:
    with pytest.raises(
        ConfigError,
        match=(
            r"no option 'kk' \(did you mean 'k'\?\); its options are: "
            r"name, unit, doc_id_separator, duplicates, relevance_level, trec_eval_averaging, k"
        ),
    ):
        ctxeval.get_metric("id_precision_at_k", kk=3)
    with pytest.raises(ConfigError, match="k must be a whole number >= 1, got 0"):
        ctxeval.get_metric("id_precision_at_k", k=0)
    with pytest.raises(
        ConfigError, match="'levenstein' is not a similarity measure; did you mean 'levenshtein'"
    ):
        ctxeval.get_metric("non_llm_context_recall", measure="levenstein")
    with pytest.raises(ConfigError, match=r"threshold must be a number in \[0, 1\]"):
        ctxeval.get_metric("non_llm_context_recall", threshold=2)


def test_the_default_registry_is_read_only_and_copies_do_not_leak() -> None:
    with pytest.raises(ConfigError, match="read-only"):
        ctxeval.default_registry().register_metric("x", object)
    first = ctxeval.default_registry().copy()
    second = ctxeval.default_registry().copy()
    first.register_metric("mine", "regtest_alpha:AlphaMetric")
    assert "mine" in first.names()
    assert "mine" not in second.names()
    assert "mine" not in ctxeval.default_registry().names()
    with pytest.raises(ConfigError, match="already registered"):
        first.register_metric("mine", object)


def test_programmatic_registration(registry: Registry) -> None:
    import attrs

    from ctxeval._plugins.base import BaseDeterministicMetric

    @attrs.frozen(kw_only=True)
    class Always(BaseDeterministicMetric):
        registry_name = "always_half"
        requires = ()

        def score(self, sample: ctxeval.Sample) -> ctxeval.MetricResult:
            return ctxeval.MetricResult.ok(0.5)

    registry.register_metric("always_half", Always)
    evaluation = ctxeval.evaluate([{}], metrics=["always_half"], registry=registry)
    assert evaluation.results[0].score == 0.5
    with pytest.raises(UnknownNameError):
        ctxeval.get_metric("always_half")
    with pytest.raises(ConfigError, match="unknown plugin group"):
        registry.register("ctxeval.nope", "x", Always)


def test_a_plugin_that_exits_at_import_is_contained(fake_registry: Registry) -> None:
    with pytest.raises(PluginError, match=r"exiter.*failed to load: SystemExit: 3"):
        fake_registry.get_metric("exiter")
    [info] = [p for p in fake_registry.plugins() if p.name == "exiter"]
    assert info.status == "broken"
    assert fake_registry.get_metric("alpha_metric").name == "alpha_metric"  # the others work


def test_a_package_claiming_a_built_in_name_does_not_take_it_away(
    fake_registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    metric = fake_registry.get_metric("id_mrr")
    assert type(metric).__module__ == "ctxeval_ids.metrics"  # ctxeval's own
    assert "'hijacker'" in caplog.text
    assert "using ctxeval's own" in caplog.text
    infos = {p.distribution: p for p in fake_registry.plugins() if p.name == "id_mrr"}
    assert infos["ctxeval"].status == "ok"
    assert "ctxeval's own is used" in (infos["ctxeval"].error or "")
    assert infos["hijacker"].status == "conflict"
