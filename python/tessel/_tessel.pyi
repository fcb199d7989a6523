"""Type stubs of the extension module `tessel._tessel` (python/src)."""

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

_Path = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """Every error tessel raises."""

class LoadError(Error):
    """A model directory that cannot be loaded (missing, malformed, unsupported)."""

class InputError(Error):
    """An input or option the model refuses (the message says which and why)."""

class UnsupportedError(InputError):
    """An argument of the reference API that tessel does not implement yet."""

class RunError(Error):
    """A model call that failed."""

def isa() -> str:
    """The instruction set the kernels run at: the best the CPU has, or TESSEL_ISA's."""

class TranslationResult:
    """One source's result, as CTranslate2's."""

    hypotheses: List[List[str]]
    scores: List[float]
    attention: List[List[List[float]]]
    logits: List[List[float]]

class AsyncTranslationResult:
    """One source's pending result of translate_batch(asynchronous=True), as CTranslate2's."""

    def result(self) -> TranslationResult:
        """Waits for the result; raises why this source failed."""
    def done(self) -> bool:
        """Whether the result is ready."""

class GenerationStepResult:
    """One token of generate_tokens, as CTranslate2's."""

    step: int
    batch_id: int
    token_id: int
    hypothesis_id: int
    token: str
    log_prob: Optional[float]
    is_last: bool
    logits: Optional[List[float]]

class TokenStream(Iterator[GenerationStepResult]):
    """The tokens of a running generate_tokens call, each as soon as it is chosen."""

    def __iter__(self) -> "TokenStream": ...
    def __next__(self) -> GenerationStepResult: ...

class ScoringResult:
    """One example's scores, as CTranslate2's: the target's tokens and the end token, and
    the log-probability of each."""

    tokens: List[str]
    log_probs: List[float]

class Translator:
    """A translation model (CTranslate2 or Hugging Face directory) and its batched sessions:
    CTranslate2's `Translator`. Pickles as its path and options; works after `fork`."""

    def __init__(
        self,
        model_path: _Path,
        device: str = "cpu",
        *,
        device_index: Union[int, List[int]] = 0,
        compute_type: str = "default",
        inter_threads: int = 1,
        intra_threads: int = 0,
        max_queued_batches: int = 0,
        flash_attention: bool = False,
        tensor_parallel: bool = False,
        files: Optional[Dict[str, Any]] = None,
    ) -> None: ...
    @property
    def model_path(self) -> str: ...
    @property
    def inter_threads(self) -> int: ...
    @property
    def intra_threads(self) -> int: ...
    def translate_batch(
        self,
        source: Sequence[Sequence[str]],
        target_prefix: Optional[Sequence[Optional[Sequence[str]]]] = None,
        *,
        max_batch_size: int = 0,
        batch_type: str = "examples",
        asynchronous: bool = False,
        beam_size: int = 2,
        patience: float = 1,
        num_hypotheses: int = 1,
        length_penalty: float = 1,
        coverage_penalty: float = 0,
        repetition_penalty: float = 1,
        no_repeat_ngram_size: int = 0,
        disable_unk: bool = False,
        suppress_sequences: Optional[Sequence[Sequence[str]]] = None,
        end_token: Optional[str] = None,
        return_end_token: bool = False,
        prefix_bias_beta: float = 0,
        max_input_length: int = 1024,
        max_decoding_length: int = 256,
        min_decoding_length: int = 1,
        use_vmap: bool = False,
        return_scores: bool = False,
        return_logits_vocab: bool = False,
        return_attention: bool = False,
        return_alternatives: bool = False,
        min_alternative_expansion_prob: float = 0,
        sampling_topk: int = 1,
        sampling_topp: float = 1,
        sampling_temperature: float = 1,
        replace_unknowns: bool = False,
        callback: Any = None,
        sampling_seed: Optional[int] = None,
    ) -> Union[List[TranslationResult], List[AsyncTranslationResult]]:
        """Translates tokenized sources as CTranslate2's translate_batch does (with
        asynchronous=True: at once, one pending result per source)."""
    def generate_tokens(
        self,
        source: Sequence[str],
        target_prefix: Optional[Sequence[str]] = None,
        *,
        max_decoding_length: int = 256,
        min_decoding_length: int = 1,
        sampling_topk: int = 1,
        sampling_topp: float = 1,
        sampling_temperature: float = 1,
        return_log_prob: bool = False,
        repetition_penalty: float = 1,
        no_repeat_ngram_size: int = 0,
        disable_unk: bool = False,
        suppress_sequences: Optional[Sequence[Sequence[str]]] = None,
        end_token: Optional[str] = None,
        max_input_length: int = 1024,
        use_vmap: bool = False,
        sampling_seed: Optional[int] = None,
    ) -> TokenStream:
        """Yields each token as soon as it is chosen, as CTranslate2's generate_tokens."""
    def score_batch(
        self,
        source: Sequence[Sequence[str]],
        target: Sequence[Sequence[str]],
        *,
        max_batch_size: int = 0,
        batch_type: str = "examples",
        max_input_length: int = 1024,
        offset: int = 0,
        asynchronous: bool = False,
    ) -> List[ScoringResult]:
        """Scores tokenized targets after their sources as CTranslate2's score_batch does."""
    def translate(
        self,
        texts: Sequence[str],
        src_lang: Optional[str] = None,
        tgt_lang: Optional[str] = None,
        *,
        beam_size: Optional[int] = None,
        max_length: Optional[int] = None,
        max_batch_size: int = 0,
        truncate: bool = False,
    ) -> List[str]:
        """Translates texts with the directory's tokenizer and generation config."""

class Model:
    """A loaded model (CTranslate2 or Hugging Face directory, any family), shared by its
    sessions."""

    def __init__(
        self,
        model_path: _Path,
        *,
        compute_type: str = "default",
        max_beam: int = 4,
        max_length: int = 512,
    ) -> None: ...
    @property
    def config(self) -> Dict[str, int]:
        """Sizes and special ids: d_model, heads, encoder_layers, decoder_layers, src_vocab,
        tgt_vocab, max_src_len, max_tgt_len, max_beam, bos_id, eos_id, pad_id."""
    @property
    def model_path(self) -> str: ...
    def session(self, intra_threads: int = 0) -> "Session":
        """A new session, its arena planned and allocated once, here."""

class Session:
    """One sequence's state over a model. Logits come back as read-only numpy arrays over
    the session's arena: its next call overwrites them (copy to keep)."""

    @property
    def logits(self) -> Any:
        """The last decoder step's logits, beams x tgt_vocab (numpy.ndarray, float32)."""
    @property
    def position(self) -> int: ...
    @property
    def source_len(self) -> Optional[int]: ...
    @property
    def model(self) -> Model: ...
    def encode(self, ids: Sequence[int]) -> None:
        """Encodes source token ids; resets the decoder."""
    def encode_audio(self, mel: Any) -> None:
        """Encodes a n_mels x frames log-mel spectrogram (Whisper); resets the decoder."""
    def decode_step(self, tokens: Sequence[int]) -> Any:
        """One position per beam; the logits, beams x tgt_vocab, over the arena."""
    def prefill(self, tokens: Sequence[int]) -> Any:
        """A forced prefix as one beam; the logits after its last token, over the arena."""
    def reorder_beams(self, parents: Sequence[int]) -> None: ...
    def reset_decoder(self) -> None: ...
    def generate(
        self,
        beam_size: int = 1,
        max_steps: int = 64,
        *,
        prefix: Optional[Sequence[int]] = None,
        length_penalty: float = 1.0,
    ) -> List[Tuple[List[int], float]]:
        """Greedy or beam search: (tokens, score) per finished hypothesis, best first."""

_WordTuple = Tuple[float, float, str, float]
_SegmentTuple = Tuple[
    int, float, float, str, List[int], float, float, float, float, Optional[List[_WordTuple]]
]

class SegmentStream(Iterator[_SegmentTuple]):
    """A running transcription: `(seek, start, end, text, tokens, temperature, avg_logprob,
    compression_ratio, no_speech_prob, words)` per final segment, `words` a list of `(start,
    end, word, probability)` with word timestamps and `None` without."""

    duration_after_vad: float
    language: str
    language_probability: float
    duration: float
    def __iter__(self) -> "SegmentStream": ...
    def __next__(self) -> _SegmentTuple: ...

class WhisperModel:
    """The engine behind tessel.WhisperModel."""

    def __init__(
        self,
        model_path: _Path,
        compute_type: str = "default",
        cpu_threads: int = 0,
        num_workers: int = 1,
        multilingual: Optional[bool] = None,
    ) -> None: ...
    @property
    def is_multilingual(self) -> bool: ...
    def start(
        self,
        audio: Union[_Path, bytes, Tuple[str, bytes]],
        *,
        language: Optional[str],
        task: str,
        beam_size: int,
        best_of: int,
        length_penalty: float,
        temperatures: List[float],
        compression_ratio_threshold: Optional[float],
        log_prob_threshold: Optional[float],
        no_speech_threshold: Optional[float],
        condition_on_previous_text: bool,
        prompt_reset_on_temperature: float,
        initial_prompt: Optional[str],
        suppress_blank: bool,
        without_timestamps: bool,
        max_initial_timestamp: float,
        word_timestamps: bool,
        prepend_punctuations: str,
        append_punctuations: str,
        vad: Optional[Tuple[float, Optional[float], int, float, int, int]],
        initial_prompt_tokens: Optional[List[int]] = None,
        hotwords: Optional[str] = None,
        prefix: Optional[str] = None,
        repetition_penalty: float = 1.0,
        no_repeat_ngram_size: int = 0,
        max_new_tokens: Optional[int] = None,
        suppress_tokens: List[int] = [-1],
        clip_timestamps: List[float] = [],
    ) -> SegmentStream: ...

class BatchedPipeline:
    """The engine behind tessel.BatchedInferencePipeline: a WhisperModel's batched
    sessions."""

    def __init__(self, model: WhisperModel) -> None: ...
    def start(
        self,
        audio: Union[_Path, bytes, Tuple[str, bytes]],
        *,
        language: Optional[str],
        task: str,
        beam_size: int,
        patience: float,
        length_penalty: float,
        repetition_penalty: float,
        no_repeat_ngram_size: int,
        temperature: float,
        initial_prompt: Optional[str],
        suppress_blank: bool,
        suppress_tokens: List[int],
        without_timestamps: bool,
        word_timestamps: bool,
        prepend_punctuations: str,
        append_punctuations: str,
        multilingual: bool,
        vad_filter: bool,
        vad: Optional[Tuple[float, Optional[float], int, float, int, int]],
        max_new_tokens: Optional[int],
        clip_timestamps: List[float],
        batch_size: int,
        hotwords: Optional[str],
    ) -> SegmentStream:
        """Starts a batched transcription; returns once its chunks are cut and its language
        is known (SegmentStream.duration_after_vad: the seconds of the chunks)."""
