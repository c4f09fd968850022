"""`import ctxeval` stays light: no litellm, no spaCy, no rapidfuzz until a plugin needs them."""

from __future__ import annotations

import json
import subprocess
import sys


def imported_after(code: str) -> set[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_ctxeval_loads_neither_litellm_nor_spacy() -> None:
    modules = imported_after("import ctxeval")
    heavy = {"litellm", "spacy", "rapidfuzz", "numpy", "pandas", "pyarrow", "tenacity"}
    assert not heavy & {m.split(".")[0] for m in modules}


def test_listing_plugins_still_imports_neither() -> None:
    modules = imported_after("import ctxeval; ctxeval.plugins()")
    assert not {"litellm", "spacy"} & {m.split(".")[0] for m in modules}
