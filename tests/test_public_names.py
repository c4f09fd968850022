"""ctxeval's public names are written once (``ctxeval._PUBLIC``, one line a name; the imports
type checkers read are held to the same names here), and each shows where it is imported
from: ``ctxeval.Evaluation`` in reprs, pickles and tracebacks."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import ctxeval

INIT = Path(ctxeval.__file__)


def _typed_names() -> set[str]:
    """The names the ``if TYPE_CHECKING:`` block of ``ctxeval/__init__.py`` imports."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            return {
                alias.asname or alias.name
                for child in node.body
                if isinstance(child, ast.ImportFrom)
                for alias in child.names
            }
    raise AssertionError("no TYPE_CHECKING block in ctxeval/__init__.py")


def test_each_public_name_is_in_the_one_map_and_typed() -> None:
    public = set(ctxeval._PUBLIC)
    assert set(ctxeval.__all__) == public | {"__version__"}
    assert len(ctxeval.__all__) == len(set(ctxeval.__all__))
    assert _typed_names() == public


def test_dir_shows_the_public_names_only() -> None:
    assert dir(ctxeval) == sorted(ctxeval.__all__)


def test_the_public_names_say_they_live_in_ctxeval() -> None:
    for name in ctxeval._PUBLIC:
        value = getattr(ctxeval, name)
        if name != "policy":
            assert value.__module__ == "ctxeval", name
    assert repr(ctxeval.Evaluation) == "<class 'ctxeval.Evaluation'>"
    assert ctxeval.ConfigError.__module__ == "ctxeval"


def test_a_result_and_an_evaluation_pickle_and_come_back() -> None:
    samples = [{"id": "a", "retrieved_context_ids": ["1", "2"], "reference_context_ids": ["1"]}]
    ev = ctxeval.evaluate(samples, metrics=["id_based_context_precision"])
    for value in (ev, ev.results[0], ctxeval.Status.OK, ctxeval.ConfigError("x")):
        data = pickle.dumps(value)
        assert b"ctxeval._" not in data  # found by its public name
        back = pickle.loads(data)
        assert type(back) is type(value)
    assert pickle.loads(pickle.dumps(ev)).results[0].score == ev.results[0].score


def test_a_traceback_names_the_public_error() -> None:
    code = "import ctxeval\nctxeval.evaluate([{'id': 'a'}], metrics=['no_such_metric'])\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "ctxeval.UnknownNameError" in done.stderr, done.stderr[-500:]
    assert "ctxeval._errors" not in done.stderr


def test_the_hooks_have_a_namespace_of_their_own_and_keep_their_old_names() -> None:
    import ctxeval.plugin
    from ctxeval.plugin import hooks

    assert "hooks" in ctxeval.plugin.__all__
    assert len(hooks.__all__) > 20
    for name in hooks.__all__:
        assert name not in ctxeval.plugin.__all__, name
        assert getattr(ctxeval.plugin, name) is getattr(hooks, name)  # importable as before


def _composed() -> Any:
    from ctxeval.plugin import Items, compose, get_matcher, policy

    return compose(
        "my_precision_at_3",
        reference=Items(field="reference_context_ids", what="reference IDs"),
        retrieved=Items(field="retrieved_context_ids", what="retrieved IDs"),
        matcher=get_matcher("id"),
        formula=policy.PrecisionAtK(k=3),
    )


def test_the_plugin_api_and_runner_spi_names_say_their_public_module() -> None:
    import ctxeval.plugin
    import ctxeval.runners
    from ctxeval.plugin import hooks

    for module in (ctxeval.plugin, ctxeval.runners, hooks):
        for name in module.__all__:
            shown = getattr(getattr(module, name), "__module__", None)
            assert not str(shown).startswith("ctxeval._"), (module.__name__, name, shown)
    assert repr(ctxeval.plugin.Pipeline) == "<class 'ctxeval.plugin.Pipeline'>"
    assert ctxeval.runners.RunPlan.__module__ == "ctxeval.runners"
    assert hooks.NeedsLLM.__module__ == "ctxeval.plugin.hooks"
    assert ctxeval.plugin.Metric.__module__ == "ctxeval"  # a name of ctxeval lives there


def test_plugin_and_runner_values_pickle_by_their_public_names(tmp_path: Path) -> None:
    import ctxeval.runners
    from ctxeval.plugin import Items, Pipeline, RetrievalUnits

    values = (
        Items(field="retrieved_context_ids", what="retrieved IDs"),
        RetrievalUnits(unit="document"),
        ctxeval.runners.SharedLimits,
        Pipeline,
    )
    data = pickle.dumps(values)
    assert b"ctxeval._" not in data  # found by their public names
    (tmp_path / "values.pickle").write_bytes(data)
    code = (  # a fresh interpreter: found through the public modules alone
        "import pickle, sys\n"
        "items, units, limits, pipeline = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "print(type(items).__module__, items.field, units.unit, limits.__name__, pipeline)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "values.pickle")],
        capture_output=True,
        text=True,
    )
    assert done.stdout.split() == [
        "ctxeval.plugin",
        "retrieved_context_ids",
        "document",
        "SharedLimits",
        "<class",
        "'ctxeval.plugin.Pipeline'>",
    ], done.stderr[-500:]


def test_a_journal_fingerprint_names_a_class_as_it_was_defined() -> None:
    """Rewriting a metric class's ``__module__`` leaves its fingerprint as it was (``--resume``
    of a journal written before still matches its rows), and a subclass is named for its own
    module."""
    from ctxeval._public import defined_name, rehome
    from ctxeval._run.journal import fingerprint

    metric = _composed()
    kind = type(metric)
    defined = kind.__module__
    assert defined.startswith("ctxeval._")
    before = fingerprint(metric)
    rehome(kind, kind.__name__, "ctxeval.plugin")  # as a public class of a private module
    try:
        assert kind.__module__ == "ctxeval.plugin"
        assert defined_name(kind) == f"{defined}.{kind.__qualname__}"
        assert fingerprint(metric) == before
        subclass = type("Mine", (kind,), {"__module__": "mine"})
        assert defined_name(subclass) == "mine.Mine"
    finally:
        kind.__module__ = defined
        delattr(kind, "_ctxeval_defined_in")
