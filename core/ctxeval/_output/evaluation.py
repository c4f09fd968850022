"""The public :class:`Evaluation`: a run's rows (:class:`~ctxeval._results.evaluation.RunResults`:
its summary, trust, frames, rows) and :meth:`Evaluation.write`, which writes its run folder.

Writing a run folder is :func:`ctxeval._output.folder.write_evaluation` (the sibling of
:func:`~ctxeval.write_report`), which reads the rows as :class:`RunResults`; the class users
hold adds the method here, one floor up, so that no import runs back from the rows to what
writes them (docs/decisions/0008-a-house-in-layers.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxeval._results.evaluation import RunResults

__all__ = ["Evaluation"]


class Evaluation(RunResults):
    """Every :class:`~ctxeval.MetricResult` of a run, in input order (sample by sample, metric
    by metric).

    Held in memory only: nothing is saved unless asked (:meth:`write` writes the run folder
    ``ctxeval evaluate --out`` writes, :meth:`to_jsonl` the rows). ``print(ev)`` shows the
    summary table (as the command line prints it), a rich console a rich table, a notebook an
    HTML table. A deterministic run's rows are kept as columns (ids, scores, each sample's JSON
    line for their evidence) and made :class:`~ctxeval.MetricResult` objects only when asked
    for: :meth:`summary`, :meth:`to_pandas`, :meth:`rows` and iteration read the columns.

    Attributes:
        results: the rows (a tuple; built on first read when the run kept them as columns).
        metrics: the metric row names, in the order they were asked for.
        samples: the samples by id, when kept (for the report); else empty.
    """

    def write(
        self,
        folder: str | os.PathLike[str],
        *,
        formats: Sequence[str] = (),
        overwrite: bool = False,
        title: str | None = None,
        data: Any = None,
    ) -> dict[str, Path]:
        """Write the run folder ``ctxeval evaluate --out FOLDER`` writes: ``results.jsonl``,
        ``summary.json`` and ``report.html``, and the files of the writers named in
        ``formats`` (``csv``, ``parquet``, ``markdown``, or a plugin's: ``--format``). Nothing
        is saved otherwise: :func:`~ctxeval.evaluate` keeps the rows in memory only.

        Args:
            folder: the run folder (made if missing, 0700; its files 0600).
            formats: writers to run besides the three every folder gets.
            overwrite: replace the run a folder holds already (else ``FileExistsError``).
            title: the report's title (by default ``ctxeval: FOLDER``).
            data: where the report finds the samples' texts when the rows do not carry them
                (runs with an LLM metric): the samples scored (a list, a DataFrame, a dict of
                columns...) or their data file, which ``summary.json`` then names (for
                ``ctxeval report`` and ``ctxeval view``). Samples held in memory are written
                to the folder as ``samples.jsonl``, where ``ctxeval view`` finds the texts.

        Returns:
            Each file's path by writer name, the default three also as ``results``,
            ``summary`` and ``report``.

        Raises:
            FileExistsError: ``folder`` holds a run already and ``overwrite`` is False.
            DataError: ``data`` is a path to no file.
            UnknownNameError, MissingExtraError: a writer of ``formats`` is unknown, or needs
                a package that is not installed (nothing is written).
            OSError: a file could not be written (the files begun are removed).
        """
        from ctxeval._output.folder import write_evaluation  # (when first called: fast import)

        return write_evaluation(
            self, folder, formats=formats, overwrite=overwrite, title=title, data=data
        )

    def to_pandas(self, details: str = "dicts") -> Any:
        """A ``pandas.DataFrame`` with one row per result (needs pandas), made from the
        columns the evaluation keeps (rows kept as columns are not built).

        Columns: ``sample_id``, ``metric``, ``status``, ``score``, ``reason``, ``details``,
        and the usage fields (``requests``, ``retries``, ``prompt_tokens``,
        ``completion_tokens``, ``cost_usd``, ``cache_hits``).

        Args:
            details: how the ``details`` column holds each row's details: ``"dicts"`` (the
                default) a dict per row, as ``row.to_dict()`` gives it; ``"json"`` its JSON
                text, as ``results.jsonl`` writes it (``json.loads`` reads it back);
                ``"none"``: no ``details`` column. With ``"json"`` or ``"none"`` and pyarrow
                installed, the frame is the compact one of a large run: made from
                :meth:`to_arrow`'s table, its text columns Arrow-backed
                (``pd.ArrowDtype(pa.string())``), ``metric`` and ``status`` categorical. A
                details dict takes about 1 kB a row (a million samples of two ID metrics:
                the process peaks at 2.7 GB with dicts, 1.1 GB with JSON text, 0.75 GB
                without details; see docs/benchmarks.md).

        Raises:
            ConfigError: ``details`` is none of those three.
            MissingExtraError: pandas is not installed.
        """
        if details == "dicts":
            return super().to_pandas()
        if details not in ("json", "none"):
            from ctxeval._errors import ConfigError

            raise ConfigError(
                f"to_pandas(details={details!r}): give 'dicts' (a dict per row, the default), "
                "'json' (JSON text per row) or 'none' (no details column)"
            )
        from ctxeval._output.frames import compact_frame

        return compact_frame(self.parts, details=details == "json")

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` with one row per result (needs pyarrow), the columns of
        ``results.parquet``: ``sample_id``, ``metric``, ``status``, ``score``, ``reason``,
        ``details`` (as JSON text, as ``results.jsonl`` writes it) and the usage fields. Made
        from the columns the evaluation keeps, a record batch per part (rows kept as columns
        are not built): the compact frame of a large run.

        Raises:
            MissingExtraError: pyarrow is not installed.
        """
        from ctxeval._data.optional import require_pyarrow
        from ctxeval._output.writers import arrow_table

        require_pyarrow("Evaluation.to_arrow()")
        return arrow_table(self.parts)
