"""tessel: fast, exact CPU inference for transformer encoder-decoders.

`WhisperModel` is faster-whisper's API (`from tessel import WhisperModel` in place of
`from faster_whisper import WhisperModel`), with its `BatchedInferencePipeline`; `Translator` is CTranslate2's
(`translate_batch`, `score_batch` and `generate_tokens` over tokens, `translate_iterable` and
`score_iterable` over streams of them), with `translate` for text in, text out; `Model` and `Session` are the
token-level API (encode, decode_step with the logits as a numpy array over the arena, generate). Model directories
are CTranslate2 conversions (with their tokenizer files, `--copy_files`) or Hugging Face
directories. Every model call releases the GIL. Errors are `tessel.Error`: `LoadError`,
`InputError` (with `UnsupportedError` for what tessel does not implement yet) and `RunError`.
Models pickle as their path and options, and work in a child process after `fork`.
"""

from ._tessel import (
    AsyncTranslationResult,
    Error,
    GenerationStepResult,
    InputError,
    LoadError,
    Model,
    RunError,
    ScoringResult,
    Session,
    TranslationResult,
    UnsupportedError,
    isa,
)
from .translator import Translator
from .whisper import (
    BatchedInferencePipeline,
    Segment,
    TranscriptionInfo,
    VadOptions,
    WhisperModel,
    Word,
)

__all__ = [
    "AsyncTranslationResult",
    "BatchedInferencePipeline",
    "Error",
    "GenerationStepResult",
    "InputError",
    "LoadError",
    "Model",
    "RunError",
    "ScoringResult",
    "Segment",
    "Session",
    "TranscriptionInfo",
    "TranslationResult",
    "Translator",
    "UnsupportedError",
    "VadOptions",
    "WhisperModel",
    "Word",
    "isa",
]
