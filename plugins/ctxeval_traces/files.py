"""JSON items from a file, a folder of files, or objects in memory: what the MLflow and
LangSmith readers read (one trace or run per item)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ctxeval import DataError

__all__ = ["json_items"]

SUFFIXES = (".json", ".jsonl", ".ndjson")


def json_items(source: Any, reader: str) -> Iterator[tuple[int, Any]]:
    """``(position, item or DataError)``: each line of a JSONL file, each element of a JSON
    array (or the one object of a JSON file), each file of a folder in name order; or each
    object of an iterable in memory (its position from 1). A source that does not exist or
    cannot be read is said at once."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES)
            return (item for file in files for item in _file_items(file))
        if not path.exists():
            raise DataError("no such file", path=str(path), hint="check the path")
        return _file_items(path)
    if isinstance(source, (dict, str, bytes)) or not isinstance(source, Iterable):
        raise DataError(
            f"the {reader} reader reads a file, a folder or a list of traces, not a "
            f"{type(source).__name__}"
        )
    return enumerate(source, start=1)


def _file_items(path: Path) -> Iterator[tuple[int, Any]]:
    import orjson

    if path.suffix == ".json":
        try:
            document = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            yield 1, DataError(f"not valid JSON: {exc}", path=str(path))
            return
        items = document if isinstance(document, list) else [document]
        yield from enumerate(items, start=1)
        return
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                yield number, DataError(f"not valid JSON: {exc}", path=str(path), line=number)
