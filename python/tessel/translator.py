"""CTranslate2's `Translator`: the extension's batched methods (`translate_batch`,
`score_batch`, `translate`) and, as CTranslate2 adds them in Python, the iterable methods
that stream an arbitrarily long input through them."""

import itertools
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from . import _tessel
from ._tessel import InputError, ScoringResult, TranslationResult

# Examples (or tokens) read ahead per batch: CTranslate2 reads 16 batches at once and sorts
# them by length, so each batch holds examples of similar length.
_READ_AHEAD = 16


class Translator(_tessel.Translator):
    __doc__ = _tessel.Translator.__doc__

    def translate_iterable(
        self,
        source: Iterable[Sequence[str]],
        target_prefix: Optional[Iterable[Optional[Sequence[str]]]] = None,
        max_batch_size: int = 32,
        batch_type: str = "examples",
        **kwargs,
    ) -> Iterator[TranslationResult]:
        """Translates an iterable of tokenized sources, `max_batch_size` at a time (16
        batches read ahead and sorted by length), yielding each result in input order, as
        CTranslate2's `translate_iterable`. `kwargs` are `translate_batch`'s options."""
        streams = [source] if target_prefix is None else [source, target_prefix]
        yield from _process(self.translate_batch, streams, max_batch_size, batch_type, kwargs)

    def score_iterable(
        self,
        source: Iterable[Sequence[str]],
        target: Iterable[Sequence[str]],
        max_batch_size: int = 64,
        batch_type: str = "examples",
        **kwargs,
    ) -> Iterator[ScoringResult]:
        """Scores an iterable of tokenized targets after their sources, as CTranslate2's
        `score_iterable`. `kwargs` are `score_batch`'s options."""
        yield from _process(self.score_batch, [source, target], max_batch_size, batch_type, kwargs)


def _process(call, streams, max_batch_size, batch_type, kwargs):
    """Reads the zipped `streams` in chunks of `_READ_AHEAD` batches and yields `call`'s
    results for each chunk in order."""
    if max_batch_size < 1:
        raise InputError("max_batch_size must be at least 1")
    if batch_type not in ("examples", "tokens"):
        raise InputError(f"batch_type {batch_type!r}: expected 'examples' or 'tokens'")
    read = max_batch_size * _READ_AHEAD if max_batch_size > 1 else max_batch_size
    for chunk in _chunks(_zip_same_length(streams), read, batch_type):
        columns = [list(column) for column in zip(*chunk)]
        yield from call(*columns, max_batch_size=max_batch_size, batch_type=batch_type, **kwargs)


def _zip_same_length(streams) -> Iterator[Tuple]:
    """The streams' examples side by side; an error when one ends before the others."""
    missing = object()
    for example in itertools.zip_longest(*streams, fillvalue=missing):
        if any(part is missing for part in example):
            raise InputError("the input iterables do not have the same length")
        yield example


def _chunks(examples, size: int, batch_type: str) -> Iterator[List[Tuple]]:
    """Groups of `size` examples, or of examples whose count times the longest source stays
    within `size` tokens."""
    chunk: List[Tuple] = []
    longest = 0
    for example in examples:
        if batch_type == "examples":
            if len(chunk) == size:
                yield chunk
                chunk = []
        else:
            longest = max(longest, len(example[0]))
            if chunk and (len(chunk) + 1) * longest > size:
                yield chunk
                chunk = []
                longest = len(example[0])
        chunk.append(example)
    if chunk:
        yield chunk
