"""Rows held as columns: :class:`Column` (one metric's rows of a chunk) and :class:`RowBlock`
(the rows of a chunk, sample by sample, metric by metric).

The deterministic fast path (:mod:`ctxeval._run.fastpath`) scores a chunk of samples per call; the
rows of most of its samples are ``ok`` rows that differ only in their score and their
(lazily computed) evidence. A column keeps just those scores, and a row is built as a
:class:`~ctxeval.MetricResult` when it is read: equal to the row a per-sample ``score`` gives,
at a fraction of the cost when most rows are only counted and averaged. The rows that are not
plain ``ok`` rows (edge cases, errors, a plugin's own results) are kept whole.

A :class:`RowBlock` is a read-only ``Sequence[MetricResult]``: whatever reads rows reads it as
it reads a list, and what knows columns (the progress count, :class:`~ctxeval.Evaluation`'s
summary and scores) reads them without building a row.

A block keeps, for its rows' evidence, each sample's *source*: the sample, or the JSON line it
was read from when the run read a JSONL file (``SampleStream._take``). A line is one
object the cycle collector never walks; a sample is several and a few times its size, and a
large run kept every one of them alive until its rows were dropped. The sample is read again
from its line when someone reads the evidence (:func:`sample_of`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, repeat
from typing import Any, Final, overload

import orjson

from ctxeval._data.collector import collector_paused
from ctxeval._data.sample import Sample
from ctxeval._results.results import NO_USAGE, LazyDetails, MetricResult, Status, Usage, _make

__all__ = [
    "Column",
    "Lines",
    "RowBlock",
    "Scores",
    "Source",
    "Tally",
    "Texts",
    "block_evidence",
    "kept",
    "sample_of",
]

Source = Sample | bytes
"""What a row block keeps of a sample: the sample, or the JSON line it was read from."""


def sample_of(source: Source) -> Sample:
    """The sample ``source`` stands for: itself, or the sample of its JSON line (read again:
    an equal sample, as the line gave one when it was first read)."""
    return Sample.from_dict(orjson.loads(source)) if isinstance(source, bytes) else source


class _Reread:
    """The sample of one JSON line, read again once for all the rows that ask for it; or the
    sample at ``position`` of a source held compactly (built when first asked for: a row
    keeps this, not the sample)."""

    __slots__ = ("_line", "_position", "_sample")

    def __init__(self, line: bytes | Sequence[Sample], position: int = -1) -> None:
        self._line = line
        self._position = position
        self._sample: Sample | None = None

    def sample(self) -> Sample:
        if self._sample is None:
            line = self._line
            if isinstance(line, bytes):
                self._sample = sample_of(line)
            else:
                self._sample = line[self._position]
        return self._sample


def _evidence_of_line(
    evidence: Callable[[Sample], Mapping[str, Any]], line: _Reread
) -> Mapping[str, Any]:
    return evidence(line.sample())


class Column:
    """One metric's rows of a chunk of samples.

    Attributes:
        metric: the metric's row name.
        scores: per sample, the score of its ``ok`` row when the column builds it (checked
            when given: a float in [0, 1]), or None when the row is in :attr:`rows`.
        rows: the rows kept whole, by position (already labelled with sample and metric).
        evidence: computes the details of a built row from its sample (read lazily).
        evidence_batch: computes them for many samples at once (the same details, in order;
            its second argument a dict the columns of one block share), when the metric has a
            faster way than :attr:`evidence` one by one (written to ``results.jsonl``, every
            row's evidence is read).
    """

    __slots__ = ("evidence", "evidence_batch", "metric", "rows", "scores")

    def __init__(
        self,
        metric: str,
        size: int,
        *,
        evidence: Callable[[Sample], Mapping[str, Any]] | None = None,
    ) -> None:
        self.metric = metric
        self.scores: list[float | None] | Scores = [None] * size
        self.rows: dict[int, MetricResult] = {}
        self.evidence = evidence
        self.evidence_batch: (
            Callable[[Sequence[Sample], dict[Any, Any]], Sequence[Mapping[str, Any]]] | None
        ) = None

    def __len__(self) -> int:
        return len(self.scores)

    def part(self, start: int, stop: int) -> Column:
        """The column of the samples at positions ``start`` to ``stop`` (renumbered from 0)."""
        column = Column(self.metric, 0, evidence=self.evidence)
        column.scores = self.scores[start:stop]
        column.rows = {p - start: r for p, r in self.rows.items() if start <= p < stop}
        column.evidence_batch = self.evidence_batch
        return column

    def compact(self) -> Column:
        """This column with its scores in one array (:class:`Scores`): how an evaluation
        keeps it."""
        if isinstance(self.scores, Scores):
            return self
        column = Column(self.metric, 0, evidence=self.evidence)
        column.scores = Scores(self.scores)
        column.rows = self.rows
        column.evidence_batch = self.evidence_batch
        return column

    def row(self, position: int, sample_id: str, sample: Sample | _Reread) -> MetricResult:
        """The row of the sample at ``position`` (``sample``: it, or its line to read again)."""
        score = self.scores[position]
        if score is None:
            return self.rows[position]
        evidence = self.evidence
        if evidence is None:
            details: Mapping[str, Any] = {}
        elif type(sample) is _Reread:
            details = LazyDetails(_evidence_of_line, evidence, sample)
        else:
            details = LazyDetails(evidence, sample)
        return _make(Status.OK, score, None, details, NO_USAGE, sample_id, self.metric)


class Tally:
    """Counts of a set of rows: ``errors``, ``undefined``, and their summed ``usage``."""

    __slots__ = ("errors", "undefined", "usage")

    def __init__(self) -> None:
        self.errors = 0
        self.undefined = 0
        self.usage = Usage()

    def add(self, row: MetricResult) -> None:
        status = row.status
        if status is Status.ERROR:
            self.errors += 1
        elif status is Status.UNDEFINED:
            self.undefined += 1
        usage = row.usage
        if usage is not NO_USAGE and not usage.is_zero:
            self.usage = self.usage + usage


class Lines(Sequence[Source]):
    """The sources of a row block held compactly: the JSON lines joined in one buffer with
    their offsets, and the few sources that are samples (not lines) by position. Equal, item
    by item, to the list it was made from; two objects however many lines (what the workers of
    the ``processes`` runner send back: no object per line to pickle, send and build again).
    """

    __slots__ = ("_buffer", "_ends", "_samples")

    def __init__(self, sources: Sequence[Source]) -> None:
        try:  # lines only (a JSONL file's): joined and measured at C speed
            self._buffer = b"".join(sources)  # type: ignore[arg-type]
        except TypeError:  # (a sample among them)
            pass
        else:
            self._ends = array("Q", accumulate(map(len, sources)))  # type: ignore[arg-type]
            self._samples: dict[int, Sample] = {}
            return
        lines: list[bytes] = []
        ends = array("Q")
        samples: dict[int, Sample] = {}
        end = 0
        for position, source in enumerate(sources):
            if isinstance(source, bytes):
                lines.append(source)
                end += len(source)
            else:
                samples[position] = source
            ends.append(end)
        self._buffer = b"".join(lines)
        self._ends = ends
        self._samples = samples

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> Source: ...

    @overload
    def __getitem__(self, index: slice) -> list[Source]: ...

    def __getitem__(self, index: int | slice) -> Source | list[Source]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._ends)
        sample = self._samples.get(index)
        if sample is not None:
            return sample
        start = self._ends[index - 1] if index else 0
        return self._buffer[start : self._ends[index]]


_NAN: Final = float("nan")


class Scores(Sequence[float | None]):
    """A column's scores in one array of doubles (``array("d")``), NaN where the row is kept
    whole (an ``ok`` score is never NaN): a sequence of floats and Nones equal, item by item,
    to the list it was made from, in 8 bytes a row (a list of floats takes 32). :attr:`values`
    is the array itself, for what reads scores in bulk (``numpy.frombuffer`` reads it without
    a copy); no numpy here, so a worker process that never keeps rows does not import it."""

    __slots__ = ("values",)

    def __init__(self, scores: Iterable[float | None] | array[float]) -> None:
        self.values: array[float] = (
            scores
            if isinstance(scores, array)
            else array("d", [_NAN if score is None else score for score in scores])
        )

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> float | None: ...

    @overload
    def __getitem__(self, index: slice) -> Scores: ...

    def __getitem__(self, index: int | slice) -> float | Scores | None:
        if isinstance(index, slice):
            return Scores(self.values[index])
        value: float = self.values[index]
        return None if value != value else value

    def __iter__(self) -> Iterator[float | None]:
        return iter(self.tolist())

    def tolist(self) -> list[float | None]:
        """The scores as a list (None where the row is kept whole)."""
        return [None if v != v else v for v in self.values]

    def __reduce__(self) -> tuple[Any, ...]:
        return (Scores, (self.values,))


class Texts(Sequence[str]):
    """Strings held compactly: one string of them all, and where each ends (what an
    evaluation keeps of a block's sample ids: two objects however many ids, not one each).
    Equal, item by item, to the list it was made from."""

    __slots__ = ("_ends", "_text")

    def __init__(self, texts: Iterable[str]) -> None:
        items = texts if isinstance(texts, list) else list(texts)
        self._text = "".join(items)
        self._ends = array("Q", accumulate(map(len, items)))  # (measured at C speed)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._ends)
        start = self._ends[index - 1] if index else 0
        return self._text[start : self._ends[index]]

    def __iter__(self) -> Iterator[str]:
        ends = self._ends  # (cut at C speed: no Python frame per string)
        return map(self._text.__getitem__, map(slice, chain((0,), ends), ends))

    def __reduce__(self) -> tuple[Any, ...]:
        # the string and its ends as they are (two objects, not one string per item): what
        # a worker of the ``processes`` runner sends its block's ids as
        return (_texts_of, (self._text, self._ends))


def _texts_of(text: str, ends: array[int]) -> Texts:
    """The :class:`Texts` of ``text`` cut at ``ends`` (how a pickled one is made again)."""
    texts = Texts.__new__(Texts)
    texts._text = text
    texts._ends = ends
    return texts


def _line_of(source: Source) -> Source:
    """What a kept block holds of ``source``: a JSON line as it is, a sample as the JSON line
    it reads back from, equal (:func:`sample_of`); a sample that would not read back equal (a
    sample with metadata, which may hold anything; graded IDs given twice) is kept as it is."""
    if type(source) is bytes or not isinstance(source, Sample) or source.metadata:
        return source
    fields = source.to_dict()
    for name in ("retrieved_context_ids", "reference_context_ids"):
        value = fields.get(name)
        if isinstance(value, dict) and len(value) != len(getattr(source, name)):
            return source
    try:
        return orjson.dumps(fields)
    except TypeError:  # (a string orjson refuses: a lone surrogate)
        return source


def kept(part: Sequence[MetricResult]) -> Sequence[MetricResult]:
    """How an :class:`~ctxeval.Evaluation` keeps ``part`` of a run's rows: a row block in its
    compact form (:meth:`RowBlock.compact`), other parts as they are."""
    return part.compact() if isinstance(part, RowBlock) else part


class RowBlock(Sequence[MetricResult]):
    """The rows of a chunk of samples, sample by sample and metric by metric, as columns.

    Rows are built when read (each read builds an equal, new row). Read-only.

    Attributes:
        sample_ids: the samples' ids, as the run labels their rows.
        sources: the samples, or the JSON lines they were read from (see :data:`Source`):
            their rows' evidence is computed from them when read.
        columns: one :class:`Column` per metric, in the run's order.
    """

    __slots__ = ("columns", "evidence", "parsed", "sample_ids", "sources")

    def __init__(
        self, sample_ids: Sequence[str], sources: Sequence[Source], columns: Sequence[Column]
    ) -> None:
        if len(sample_ids) != len(sources) or any(len(c) != len(sources) for c in columns):
            raise ValueError("a row block needs one id, one sample and one entry per column each")
        self.sample_ids = sample_ids
        self.sources = sources
        self.columns = tuple(columns)
        self.evidence: object = None
        """The details of the block's plain rows while the writers of a run folder write it
        (:func:`ctxeval._output.lines.evidence_of`), else None."""
        self.parsed: Sequence[Sample] | None = None
        """The samples of :attr:`sources` as the run read them, while the block is on its
        way to the reader (its rows' evidence is then computed without reading the lines
        again); dropped once the reader has moved on (:meth:`RowStream.parts
        <ctxeval.RowStream.parts>`), so that a kept block holds lines, not samples."""

    @property
    def samples(self) -> list[Sample]:
        """The samples (read again from their lines where the block keeps lines)."""
        return list(map(sample_of, self.sources))

    def __len__(self) -> int:
        return len(self.sources) * len(self.columns)

    @overload
    def __getitem__(self, index: int) -> MetricResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[MetricResult]: ...

    def __getitem__(self, index: int | slice) -> MetricResult | list[MetricResult]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("row block index out of range")
        sample, metric = divmod(index, len(self.columns))
        return self.columns[metric].row(sample, self.sample_ids[sample], self.held(sample))

    def __iter__(self) -> Iterator[MetricResult]:
        columns = self.columns
        sources = self.sources
        if getattr(sources, "held_compactly", False):  # (each sample built when asked for)
            compact: Any = sources  # (its items: samples)
            held: Iterable[Sample | _Reread] = map(_Reread, repeat(compact), range(len(compact)))
        else:
            held = map(_held, sources)
        for position, (sample_id, sample) in enumerate(zip(self.sample_ids, held, strict=True)):
            for column in columns:  # (one sample for all of its rows)
                yield column.row(position, sample_id, sample)

    def __repr__(self) -> str:
        return f"<RowBlock {len(self.sources)} samples x {len(self.columns)} metrics>"

    def split(self, size: int) -> Iterator[RowBlock]:
        """The block in blocks of ``size`` samples (itself when it is no larger): the same
        rows, in order."""
        count = len(self.sources)
        if count <= size:
            yield self
            return
        for start in range(0, count, size):
            stop = min(count, start + size)
            block = RowBlock(
                self.sample_ids[start:stop],
                self.sources[start:stop],
                [c.part(start, stop) for c in self.columns],
            )
            if self.parsed is not None:
                block.parsed = self.parsed[start:stop]
            yield block

    def held(self, position: int) -> Sample | _Reread:
        """What the rows of the sample at ``position`` read their evidence from: the sample,
        or its line, read again once for all of them (of a source held compactly: its
        position there, the sample built when first asked for)."""
        sources = self.sources
        if getattr(sources, "held_compactly", False):  # (its items: samples)
            return _Reread(sources, position)  # type: ignore[arg-type]
        return _held(sources[position])

    def rows_of(self, column: Column) -> list[MetricResult]:
        """The rows of one of the block's columns, in order (built now)."""
        return [
            column.row(position, sample_id, self.held(position))
            for position, sample_id in enumerate(self.sample_ids)
        ]

    def compact(self) -> RowBlock:
        """The same rows held in a few objects per block (what an evaluation keeps): the ids as
        :class:`Texts`, the scores as :class:`Scores`, the sources as :class:`Lines` (a sample
        as the JSON line it reads back from, equal; see :func:`_line_of`), or as they are when
        they say they are held compactly already (``held_compactly``: a columnar source's
        samples, built from its columns when read). Its rows equal this
        block's, row by row."""
        sources = self.sources
        if not isinstance(sources, Lines) and not getattr(sources, "held_compactly", False):
            sources = Lines([_line_of(source) for source in sources])
        ids = self.sample_ids
        return RowBlock(
            ids if isinstance(ids, Texts) else Texts(ids),
            sources,
            [column.compact() for column in self.columns],
        )

    def column(self, metric: str) -> Column | None:
        """The column of ``metric`` (its row name), if the block has one."""
        return next((c for c in self.columns if c.metric == metric), None)

    def tally(self) -> Tally:
        """The counts of the block's rows, read from the columns (built rows are ``ok``)."""
        tally = Tally()
        for column in self.columns:
            for row in column.rows.values():
                tally.add(row)
        return tally


def _held(source: Source) -> Sample | _Reread:
    """What a row holds for its evidence: the sample, or its line to read again."""
    return _Reread(source) if isinstance(source, bytes) else source


def block_evidence(block: RowBlock) -> tuple[list[Sample] | None, list[Sequence[Any] | None]]:
    """The samples of ``block`` (None when no column has evidence) and, per column, the
    details of its plain rows by position (None for a column without a batch form), computed
    now by the columns' batch form (what the writers and :meth:`Evaluation.to_pandas
    <ctxeval.Evaluation.to_pandas>` read; the same details as each row's)."""
    columns = block.columns
    samples: list[Sample] | None = None
    memo: dict[Any, Any] = {}  # what the columns' metrics share (sides read once)
    details: list[Sequence[Any] | None] = []
    with collector_paused():  # (objects by the thousand, none of them cyclic)
        for column in columns:  # each column's evidence, a batch of its plain rows at a time
            batch = column.evidence_batch
            if batch is None or column.evidence is None:
                details.append(None)
                continue
            if samples is None:
                parsed = block.parsed
                samples = (
                    list(parsed)
                    if parsed is not None
                    else [sample_of(source) for source in block.sources]
                )
            scores = column.scores
            if column.rows:  # (rows kept whole have their own details)
                plain = [s for s, score in zip(samples, scores, strict=True) if score is not None]
                made = iter(batch(plain, {}))
                details.append([None if score is None else next(made) for score in scores])
            else:
                details.append(batch(samples, memo))
    return samples, details


def tally(rows: Sequence[MetricResult]) -> Tally:
    """The counts of ``rows`` (a :class:`RowBlock` is read from its columns)."""
    if isinstance(rows, RowBlock):
        return rows.tally()
    counts = Tally()
    for row in rows:
        counts.add(row)
    return counts


def scores_of(parts: Sequence[Sequence[MetricResult]], metric: str) -> list[float | None]:
    """The scores of ``metric``'s rows in ``parts`` (blocks or plain sequences of rows), in
    order (None for undefined and error rows)."""
    out: list[float | None] = []
    for part in parts:
        if isinstance(part, RowBlock):
            column = part.column(metric)
            if column is not None:
                scores = column.scores
                values = scores.tolist() if isinstance(scores, Scores) else list(scores)
                for i, row in column.rows.items():
                    values[i] = row.score
                out += values
        else:
            out += [row.score for row in part if row.metric == metric]
    return out


def tally_of(parts: Sequence[Sequence[MetricResult]], metric: str) -> Tally:
    """The counts of ``metric``'s rows in ``parts``."""
    counts = Tally()
    for part in parts:
        if isinstance(part, RowBlock):
            column = part.column(metric)
            for row in column.rows.values() if column is not None else ():
                counts.add(row)
        else:
            for row in part:
                if row.metric == metric:
                    counts.add(row)
    return counts


def metrics_of(parts: Sequence[Sequence[MetricResult]]) -> list[str]:
    """The metric names of the rows in ``parts``, in order of first appearance."""
    names: dict[str, None] = {}
    for part in parts:
        if isinstance(part, RowBlock):
            names.update(dict.fromkeys(c.metric for c in part.columns))
        else:
            names.update(dict.fromkeys(row.metric for row in part))
    return list(names)
