"""faster-whisper's `WhisperModel.transcribe` over tessel's transcription sessions, and its
`BatchedInferencePipeline` over tessel's batched ones.

Code written for faster-whisper runs by changing its import. The keyword arguments tessel does
not implement yet raise `tessel.UnsupportedError` when given a value other than
faster-whisper's default (`UNSUPPORTED` lists them); the rest mean what they mean there.
"""

import logging
import os
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Iterator, List, Optional, Tuple, Union

from . import _tessel


@dataclass
class Word:
    """A word with its timing (`word_timestamps=True`): its text with its leading space and
    merged punctuation, start and end in seconds, and its tokens' mean probability."""

    start: float
    end: float
    word: str
    probability: float

    def _asdict(self):
        return asdict(self)


@dataclass
class Segment:
    """A timed piece of the transcript, with faster-whisper's fields."""

    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: List[int]
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: Optional[List[Word]]
    temperature: Optional[float]

    def _asdict(self):
        return asdict(self)


@dataclass
class VadOptions:
    """faster-whisper's voice activity detection options (`vad_parameters`), same defaults:
    a 32 ms window is speech at probability `threshold` or more and silence below
    `neg_threshold` (`None`: `threshold - 0.15`, at least 0.01); chunks of speech up to
    `min_speech_duration_ms` are dropped, longer than `max_speech_duration_s` split, ended by
    `min_silence_duration_ms` of silence, and padded by `speech_pad_ms` on each side."""

    threshold: float = 0.5
    neg_threshold: Optional[float] = None
    min_speech_duration_ms: int = 0
    max_speech_duration_s: float = float("inf")
    min_silence_duration_ms: int = 2000
    speech_pad_ms: int = 400


@dataclass
class TranscriptionInfo:
    """What faster-whisper returns beside the segments."""

    language: str
    language_probability: float
    duration: float
    duration_after_vad: float
    all_language_probs: Optional[List[Tuple[str, float]]]
    transcription_options: dict
    vad_options: Any


# faster-whisper's keyword arguments that tessel does not implement yet, with the value that
# turns each off (its default) and why.
UNSUPPORTED = {
    "multilingual": (False, "one language per file"),
    "chunk_length": (None, "windows are 30 s"),
    "language_detection_threshold": (0.5, "the language is detected on the first 30 s"),
    "language_detection_segments": (1, "the language is detected on the first 30 s"),
    "log_progress": (False, "no progress bar"),
}


def _is_default(value, default) -> bool:
    return value == default


class WhisperModel:
    """A Whisper model directory (CTranslate2 with its tokenizer files, or Hugging Face).

    `compute_type` is "default" (the directory's weights), "float32", "float16",
    "bfloat16" or "int8" (and CTranslate2's "int8_float32", "int8_float16"); `cpu_threads`
    threads run each transcription's products (0: every core); at most `num_workers`
    transcriptions run at once (each holds one session's memory). `multilingual_model`
    (tessel's own) overrides the vocabulary's say on whether the model takes language and task
    tokens (`None`: the full 51,865-token vocabulary is multilingual).
    """

    def __init__(
        self,
        model_size_or_path: Union[str, "os.PathLike[str]"],
        device: str = "auto",
        device_index: Union[int, List[int]] = 0,
        compute_type: str = "default",
        cpu_threads: int = 0,
        num_workers: int = 1,
        download_root: Optional[str] = None,
        local_files_only: bool = False,
        files: Optional[dict] = None,
        revision: Optional[str] = None,
        use_auth_token: Optional[Union[str, bool]] = None,
        multilingual_model: Optional[bool] = None,
        **model_kwargs,
    ):
        if device not in ("auto", "cpu"):
            raise _tessel.InputError("device %r: tessel runs on the CPU" % (device,))
        if files is not None:
            raise _tessel.UnsupportedError(
                "tessel does not support files yet (give a model directory)"
            )
        if not os.path.isdir(model_size_or_path):
            raise _tessel.LoadError(
                "%r is not a model directory: tessel does not download models; convert one "
                "with ct2-transformers-converter --copy_files tokenizer.json "
                "preprocessor_config.json, or give a Hugging Face directory"
                % (model_size_or_path,)
            )
        if model_kwargs:
            raise _tessel.UnsupportedError(
                "tessel does not support the CTranslate2 model arguments %s"
                % ", ".join(sorted(model_kwargs))
            )
        self._opened_with = dict(
            model_size_or_path=os.fspath(model_size_or_path),
            compute_type=compute_type,
            cpu_threads=cpu_threads,
            num_workers=num_workers,
            multilingual_model=multilingual_model,
        )
        self._model = _tessel.WhisperModel(
            os.fspath(model_size_or_path),
            compute_type,
            cpu_threads,
            num_workers,
            multilingual_model,
        )

    def __reduce__(self):
        """Pickles as the path and options, which reopen the model."""
        return (_reopen, (self._opened_with,))

    @property
    def is_multilingual(self) -> bool:
        return self._model.is_multilingual

    def transcribe(
        self,
        audio: Union[str, "os.PathLike[str]", Any],
        language: Optional[str] = None,
        task: str = "transcribe",
        log_progress: bool = False,
        beam_size: int = 5,
        best_of: int = 5,
        patience: float = 1,
        length_penalty: float = 1,
        repetition_penalty: float = 1,
        no_repeat_ngram_size: int = 0,
        temperature: Union[float, List[float], Tuple[float, ...]] = (
            0.0, 0.2, 0.4, 0.6, 0.8, 1.0,
        ),
        compression_ratio_threshold: Optional[float] = 2.4,
        log_prob_threshold: Optional[float] = -1.0,
        no_speech_threshold: Optional[float] = 0.6,
        condition_on_previous_text: bool = True,
        prompt_reset_on_temperature: float = 0.5,
        initial_prompt: Optional[Union[str, Iterable[int]]] = None,
        prefix: Optional[str] = None,
        suppress_blank: bool = True,
        suppress_tokens: Optional[List[int]] = (-1,),
        without_timestamps: bool = False,
        max_initial_timestamp: float = 1.0,
        word_timestamps: bool = False,
        prepend_punctuations: str = "\"'“¿([{-",
        append_punctuations: str = "\"'.。,，!！?？:：”)]}、",
        multilingual: bool = False,
        vad_filter: bool = False,
        vad_parameters: Optional[Any] = None,
        max_new_tokens: Optional[int] = None,
        chunk_length: Optional[int] = None,
        clip_timestamps: Union[str, List[float]] = "0",
        hallucination_silence_threshold: Optional[float] = None,
        hotwords: Optional[str] = None,
        language_detection_threshold: Optional[float] = 0.5,
        language_detection_segments: int = 1,
    ) -> Tuple[Iterator[Segment], TranscriptionInfo]:
        """Transcribes `audio`: a WAV file's path, or float32 samples at 16 kHz (a numpy array
        or anything `numpy.asarray` takes). Returns a lazy iterator of segments (each yielded
        as soon as it is final; the transcription runs a few segments ahead of the reader and
        stops when the iterator is dropped) and the transcription info. The language is known
        (given or detected) when this returns; bad options, audio or models raise here."""
        given = dict(locals())
        # faster-whisper: None and [] suppress nothing; -1 stands for the non-speech symbols.
        suppress = [] if suppress_tokens is None else [int(t) for t in suppress_tokens]
        for name, (default, why) in UNSUPPORTED.items():
            if not _is_default(given[name], default):
                raise _tessel.UnsupportedError(
                    "tessel does not support %s=%r yet (%s)" % (name, given[name], why)
                )
        prompt_tokens = None
        if initial_prompt is not None and not isinstance(initial_prompt, str):
            prompt_tokens = [int(t) for t in initial_prompt]
            initial_prompt = None
        # faster-whisper: "0" is the whole file; any other clip_timestamps turn the VAD off.
        try:
            if isinstance(clip_timestamps, str):
                clips = [float(t) for t in clip_timestamps.split(",") if clip_timestamps]
            else:
                clips = [float(t) for t in clip_timestamps]
        except (TypeError, ValueError) as e:
            raise _tessel.InputError("clip_timestamps: %s" % e) from None
        clipped = not (isinstance(clip_timestamps, str) and clip_timestamps == "0")
        vad_options = _vad_options(vad_filter and not clipped, vad_parameters)
        if isinstance(temperature, (int, float)):
            temperatures = [float(temperature)]
        else:
            temperatures = [float(t) for t in temperature]
        stream = self._model.start(
            _audio(audio),
            language=language,
            task=task,
            beam_size=beam_size,
            best_of=best_of,
            length_penalty=length_penalty,
            temperatures=temperatures,
            compression_ratio_threshold=compression_ratio_threshold,
            log_prob_threshold=log_prob_threshold,
            no_speech_threshold=no_speech_threshold,
            condition_on_previous_text=condition_on_previous_text,
            prompt_reset_on_temperature=prompt_reset_on_temperature,
            initial_prompt=initial_prompt,
            suppress_blank=suppress_blank,
            without_timestamps=without_timestamps,
            max_initial_timestamp=max_initial_timestamp,
            word_timestamps=word_timestamps,
            prepend_punctuations=prepend_punctuations,
            append_punctuations=append_punctuations,
            vad=None if vad_options is None else (
                float(vad_options.threshold),
                None if vad_options.neg_threshold is None else float(vad_options.neg_threshold),
                int(vad_options.min_speech_duration_ms),
                float(vad_options.max_speech_duration_s),
                int(vad_options.min_silence_duration_ms),
                int(vad_options.speech_pad_ms),
            ),
            initial_prompt_tokens=prompt_tokens,
            hotwords=hotwords,
            prefix=prefix,
            repetition_penalty=float(repetition_penalty),
            no_repeat_ngram_size=int(no_repeat_ngram_size),
            max_new_tokens=None if max_new_tokens is None else int(max_new_tokens),
            suppress_tokens=suppress,
            clip_timestamps=clips,
            patience=float(patience),
            hallucination_silence_threshold=(
                None if hallucination_silence_threshold is None
                else float(hallucination_silence_threshold)
            ),
        )
        options = {
            k: given[k]
            for k in (
                "beam_size", "best_of", "patience", "length_penalty", "repetition_penalty",
                "no_repeat_ngram_size", "temperature", "compression_ratio_threshold",
                "log_prob_threshold", "no_speech_threshold",
                "condition_on_previous_text", "prompt_reset_on_temperature", "initial_prompt",
                "suppress_blank", "without_timestamps", "max_initial_timestamp",
                "word_timestamps", "prepend_punctuations", "append_punctuations",
                "max_new_tokens", "hotwords", "prefix", "clip_timestamps",
                "hallucination_silence_threshold",
            )
        }
        options["suppress_tokens"] = suppress
        info = TranscriptionInfo(
            language=stream.language,
            language_probability=stream.language_probability,
            duration=stream.duration,
            duration_after_vad=stream.duration_after_vad,
            all_language_probs=None,
            transcription_options=options,
            vad_options=vad_options,
        )
        return _segments(stream), info


def _vad_options(vad_filter, vad_parameters) -> Optional[VadOptions]:
    """The detector's options as faster-whisper takes them: `None` without `vad_filter`;
    `vad_parameters` a `VadOptions`, a dict of its fields, or `None` for the defaults."""
    if not vad_filter:
        return None
    if vad_parameters is None:
        return VadOptions()
    if isinstance(vad_parameters, dict):
        try:
            return VadOptions(**vad_parameters)
        except TypeError as e:
            raise _tessel.InputError("vad_parameters: %s" % e) from None
    if isinstance(vad_parameters, VadOptions):
        return vad_parameters
    fields = VadOptions.__dataclass_fields__
    if all(hasattr(vad_parameters, f) for f in fields):
        # faster-whisper's own VadOptions, or any object with its fields.
        return VadOptions(**{f: getattr(vad_parameters, f) for f in fields})
    raise _tessel.InputError(
        "vad_parameters: expected a dict or VadOptions, got %s" % type(vad_parameters).__name__
    )


def _audio(audio):
    """A path as a string, a binary file object's WAV contents as ("wav", bytes), or samples
    as the bytes of a contiguous float32 array."""
    if isinstance(audio, (str, os.PathLike)):
        return os.fspath(audio)
    if hasattr(audio, "read"):
        data = audio.read()
        if not isinstance(data, bytes):
            raise _tessel.InputError("audio: a file object must be opened in binary mode")
        return ("wav", data)
    import numpy as np

    samples = np.ascontiguousarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise _tessel.InputError(
            "audio: expected one channel of samples, got shape %s" % (samples.shape,)
        )
    return samples.astype("<f4", copy=False).tobytes()


def _reopen(opened_with) -> WhisperModel:
    return WhisperModel(**opened_with)


def _segments(stream, **fixed) -> Iterator[Segment]:
    """The stream's segments, numbered from 1; `fixed` overrides fields (the batched
    pipeline's `temperature`: the caller's first, as given)."""
    for n, s in enumerate(stream, start=1):
        seek, start, end, text, tokens, temperature, avg_logprob, ratio, no_speech, words = s
        temperature = fixed.get("temperature", temperature)
        yield Segment(
            id=n,
            seek=seek,
            start=start,
            end=end,
            text=text,
            tokens=tokens,
            avg_logprob=avg_logprob,
            compression_ratio=ratio,
            no_speech_prob=no_speech,
            words=None if words is None else [Word(*w) for w in words],
            temperature=temperature,
        )


# faster-whisper's `chunk_length` default: the feature extractor's 30 s.
_CHUNK_LENGTH = 30

_logger = logging.getLogger("tessel")


class BatchedInferencePipeline:
    """faster-whisper's `BatchedInferencePipeline` over a `tessel.WhisperModel`: the speech
    the voice activity detector finds (or the caller's clips) packed into chunks of at most
    30 s, `batch_size` chunks decoded together, each decoder step reading the weights once for
    all of them.

    As faster-whisper's batched pipeline: no conditioning on earlier text, no temperature
    fallback (the first temperature is reported; decoding is beam search or greedy), no silence
    thresholds, and no timestamps unless `without_timestamps=False`. The arguments the batched
    pipeline does not read are accepted and ignored as there (`best_of`,
    `compression_ratio_threshold`, `log_prob_threshold`, `no_speech_threshold`,
    `condition_on_previous_text`, `prompt_reset_on_temperature`, `prefix`,
    `max_initial_timestamp`, `hallucination_silence_threshold`, the temperatures after the
    first). Pipelines over one model share its batched sessions (at most `num_workers` kept).
    """

    def __init__(self, model: WhisperModel):
        if not isinstance(model, WhisperModel):
            raise TypeError(
                "model: expected a tessel.WhisperModel, got %s" % type(model).__name__
            )
        self.model = model
        self._pipeline = _tessel.BatchedPipeline(model._model)

    def __reduce__(self):
        """Pickles as its model (which pickles as its path and options)."""
        return (BatchedInferencePipeline, (self.model,))

    def transcribe(
        self,
        audio: Union[str, "os.PathLike[str]", Any],
        language: Optional[str] = None,
        task: str = "transcribe",
        log_progress: bool = False,
        beam_size: int = 5,
        best_of: int = 5,
        patience: float = 1,
        length_penalty: float = 1,
        repetition_penalty: float = 1,
        no_repeat_ngram_size: int = 0,
        temperature: Union[float, List[float], Tuple[float, ...]] = [
            0.0,
            0.2,
            0.4,
            0.6,
            0.8,
            1.0,
        ],
        compression_ratio_threshold: Optional[float] = 2.4,
        log_prob_threshold: Optional[float] = -1.0,
        no_speech_threshold: Optional[float] = 0.6,
        condition_on_previous_text: bool = True,
        prompt_reset_on_temperature: float = 0.5,
        initial_prompt: Optional[Union[str, Iterable[int]]] = None,
        prefix: Optional[str] = None,
        suppress_blank: bool = True,
        suppress_tokens: Optional[List[int]] = [-1],
        without_timestamps: bool = True,
        max_initial_timestamp: float = 1.0,
        word_timestamps: bool = False,
        prepend_punctuations: str = "\"'“¿([{-",
        append_punctuations: str = "\"'.。,，!！?？:：”)]}、",
        multilingual: bool = False,
        vad_filter: bool = True,
        vad_parameters: Optional[Union[dict, VadOptions]] = None,
        max_new_tokens: Optional[int] = None,
        chunk_length: Optional[int] = None,
        clip_timestamps: Optional[List[dict]] = None,
        hallucination_silence_threshold: Optional[float] = None,
        batch_size: int = 8,
        hotwords: Optional[str] = None,
        language_detection_threshold: Optional[float] = 0.5,
        language_detection_segments: int = 1,
    ) -> Tuple[Iterator[Segment], TranscriptionInfo]:
        """Transcribes `audio` (as `WhisperModel.transcribe` takes it) in chunks of at most
        30 s, `batch_size` at a time: the speech the detector finds with `vad_filter` (by
        default; `vad_parameters` as faster-whisper's batched pipeline takes them), the clips of
        `clip_timestamps` (a list of `{"start": s, "end": e}` in seconds; `vad_filter` is then
        ignored), or the whole audio when it is shorter than 30 s. Returns a lazy iterator of
        segments (the chunks are decoded as they are read; dropping the iterator stops before
        the next batch) and the transcription info. The speech, the language and
        `info.duration_after_vad` are known when this returns; bad options, audio or models
        raise here."""
        model = self.model
        # What tessel cannot honour: raised, not ignored.
        if log_progress:
            raise _tessel.UnsupportedError(
                "tessel does not support log_progress=True yet (no progress bar)"
            )
        if (chunk_length or _CHUNK_LENGTH) != _CHUNK_LENGTH:
            raise _tessel.UnsupportedError(
                "tessel does not support chunk_length=%r yet (chunks are 30 s)" % (chunk_length,)
            )
        detects = language is None and model.is_multilingual
        if detects and language_detection_segments != 1:
            # With one segment the threshold changes nothing: the first 30 s's most likely
            # language is taken either way.
            raise _tessel.UnsupportedError(
                "tessel does not support language_detection_segments=%r yet (the language is "
                "detected on the first 30 s)" % (language_detection_segments,)
            )
        if initial_prompt is not None and not isinstance(initial_prompt, str):
            # faster-whisper's batched pipeline encodes it as text (and raises TypeError:
            # "TextInputSequence must be str").
            raise TypeError(
                "initial_prompt: the batched pipeline takes text, not token ids (as "
                "faster-whisper's)"
            )
        if multilingual and not model.is_multilingual:
            _logger.warning(
                "The current model is English-only but the multilingual parameter is set to "
                "True; setting to False instead."
            )
            multilingual = False
        if isinstance(temperature, (list, tuple)):
            temperatures = list(temperature[:1])
            if not temperatures:
                raise _tessel.InputError("temperature: expected at least one value")
        else:
            temperatures = [temperature]
        # faster-whisper: None and [] suppress nothing; -1 stands for the non-speech symbols.
        suppress = [] if suppress_tokens is None else [int(t) for t in suppress_tokens]
        clips, clip_samples = _batched_clips(clip_timestamps)
        vad_options = vad_parameters
        vad = None
        if not clips and vad_filter:
            vad_options = _batched_vad_options(vad_parameters)
            vad = (
                float(vad_options.threshold),
                None if vad_options.neg_threshold is None else float(vad_options.neg_threshold),
                int(vad_options.min_speech_duration_ms),
                float(vad_options.max_speech_duration_s),
                int(vad_options.min_silence_duration_ms),
                int(vad_options.speech_pad_ms),
            )
        stream = self._pipeline.start(
            _audio(audio),
            language=language,
            task=task,
            beam_size=int(beam_size),
            patience=float(patience),
            length_penalty=float(length_penalty),
            repetition_penalty=float(repetition_penalty),
            no_repeat_ngram_size=int(no_repeat_ngram_size),
            temperature=float(temperatures[0]),
            initial_prompt=initial_prompt,
            suppress_blank=bool(suppress_blank),
            suppress_tokens=suppress,
            without_timestamps=bool(without_timestamps),
            word_timestamps=bool(word_timestamps),
            prepend_punctuations=prepend_punctuations,
            append_punctuations=append_punctuations,
            multilingual=bool(multilingual),
            vad_filter=vad is not None,
            vad=vad,
            max_new_tokens=None if max_new_tokens is None else int(max_new_tokens),
            clip_timestamps=clips,
            batch_size=int(batch_size),
            hotwords=hotwords,
        )
        # faster-whisper's batched TranscriptionOptions, the values it forces included.
        options = dict(
            beam_size=beam_size,
            best_of=best_of,
            patience=patience,
            length_penalty=length_penalty,
            repetition_penalty=repetition_penalty,
            no_repeat_ngram_size=no_repeat_ngram_size,
            log_prob_threshold=log_prob_threshold,
            no_speech_threshold=no_speech_threshold,
            compression_ratio_threshold=compression_ratio_threshold,
            condition_on_previous_text=False,
            prompt_reset_on_temperature=0.5,
            temperatures=temperatures,
            initial_prompt=initial_prompt,
            prefix=prefix,
            suppress_blank=suppress_blank,
            suppress_tokens=suppress,
            without_timestamps=without_timestamps,
            max_initial_timestamp=0.0,
            word_timestamps=word_timestamps,
            prepend_punctuations=prepend_punctuations,
            append_punctuations=append_punctuations,
            multilingual=multilingual,
            max_new_tokens=max_new_tokens,
            clip_timestamps=clip_samples,
            hallucination_silence_threshold=None,
            hotwords=hotwords,
        )
        info = TranscriptionInfo(
            language=stream.language,
            language_probability=stream.language_probability,
            duration=stream.duration,
            duration_after_vad=stream.duration_after_vad,
            all_language_probs=None,
            transcription_options=options,
            vad_options=vad_options,
        )
        return _segments(stream, temperature=temperatures[0]), info


def _batched_clips(clip_timestamps):
    """faster-whisper's batched `clip_timestamps` (a list of `{"start": s, "end": e}` in
    seconds; `None` or empty: none) as a flat list of seconds, start, end, …, and as the
    sample-index dicts faster-whisper keeps (`None` without clips)."""
    if not clip_timestamps:
        return [], None
    clips, samples = [], []
    try:
        for i, clip in enumerate(clip_timestamps):
            start, end = float(clip["start"]), float(clip["end"])
            clips += [start, end]
            samples.append({k: int(v * 16000) for k, v in clip.items()})
            if (int(end * 16000) - int(start * 16000)) / 16000 > 30:
                _logger.warning(
                    "Segment %d is longer than 30 seconds, only the first 30 seconds will be "
                    "transcribed",
                    i,
                )
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise _tessel.InputError(
            'clip_timestamps: expected a list of {"start": s, "end": e} in seconds (%s: %s)'
            % (type(e).__name__, e)
        ) from None
    return clips, samples


def _batched_vad_options(vad_parameters):
    """The detector's options as faster-whisper's batched pipeline builds them: without
    `vad_parameters`, speech chunks of at most 30 s and silences from 160 ms; from a dict,
    its fields over the *plain* `VadOptions` defaults (silences from 2000 ms) with the longest
    speech chunk forced to 30 s (`max_speech_duration_s` is popped from the caller's dict, as
    faster-whisper pops it); a `VadOptions` (or any object with its fields) as it is."""
    if vad_parameters is None:
        return VadOptions(max_speech_duration_s=_CHUNK_LENGTH, min_silence_duration_ms=160)
    if isinstance(vad_parameters, dict):
        vad_parameters.pop("max_speech_duration_s", None)
        try:
            return VadOptions(**vad_parameters, max_speech_duration_s=_CHUNK_LENGTH)
        except TypeError as e:
            raise _tessel.InputError("vad_parameters: %s" % e) from None
    fields = VadOptions.__dataclass_fields__
    if isinstance(vad_parameters, VadOptions) or all(
        hasattr(vad_parameters, f) for f in fields
    ):
        return vad_parameters
    raise _tessel.InputError(
        "vad_parameters: expected a dict or VadOptions, got %s" % type(vad_parameters).__name__
    )
