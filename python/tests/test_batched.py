"""tessel.BatchedInferencePipeline against faster-whisper 1.2.1's on the random-weight Whisper
fixtures of tests/transcribe: tools/make_batched_golden.py ran faster-whisper's
`BatchedInferencePipeline(model).transcribe(audio, **options)` and recorded the segments
(tests/transcribe/<model>/batched.json); the same calls here give the same segments. A few of
its runs (CI time): words with timestamps, a vad_parameters dict, clip timestamps, short audio
without the detector, silence, and per-chunk languages on the multilingual model."""

import copy
import json
import logging
import pickle

import numpy as np
import pytest

import tessel
from conftest import TESTS, read_wav

TRANSCRIBE = TESTS / "transcribe"
RATE = 16000


def zeros(seconds):
    return np.zeros(int(round(seconds * RATE)), dtype=np.float32)


def audios():
    """The fixture's audios, as `audios()` in tools/make_batched_golden.py builds them."""
    clip = read_wav(TRANSCRIBE / "clip.wav")
    long = np.concatenate([p for _ in range(4) for p in (clip, zeros(1.5))])
    gaps = np.concatenate(
        [clip, zeros(6), clip, zeros(0.3), clip, zeros(12), clip, zeros(3), clip]
    )
    return {"long": long, "gaps": gaps, "short": long[: 20 * RATE], "silence": zeros(10)}


AUDIOS = audios()


def golden(name):
    return json.loads((TRANSCRIBE / name / "batched.json").read_text())


def pipeline(name, **kwargs):
    # The multilingual fixture's vocabulary is small: faster-whisper was given a model that
    # says it is multilingual (tools/make_batched_golden.py), and so is tessel.
    multilingual = name == "tiny_multi_32"
    model = tessel.WhisperModel(
        str(TRANSCRIBE / name / "model"), multilingual_model=multilingual or None, **kwargs
    )
    return tessel.BatchedInferencePipeline(model)


def check_segments(got, want, what, temperature=None):
    """Ids, seeks, times, tokens and text exact; compression ratio to its float parsing;
    log-probability within 2e-4 and no-speech probability within 1e-4 (CTranslate2 sums in
    another order); words' text exact, times within 10 ms, probabilities within 0.1 %."""
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        at = "%s segment %d" % (what, i + 1)
        assert isinstance(g, tessel.Segment), at
        assert (g.id, g.seek, g.tokens, g.text) == (w["id"], w["seek"], w["tokens"], w["text"]), at
        assert g.start == pytest.approx(w["start"], abs=1e-9), at
        assert g.end == pytest.approx(w["end"], abs=1e-9), at
        assert g.temperature == (w["temperature"] if temperature is None else temperature), at
        assert g.compression_ratio == pytest.approx(w["compression_ratio"], rel=1e-12), at
        assert abs(g.avg_logprob - w["avg_logprob"]) < 2e-4, at
        assert abs(g.no_speech_prob - w["no_speech_prob"]) < 1e-4, at
        if w["words"] is None:
            assert g.words is None, at
            continue
        assert [x.word for x in g.words] == [x[0] for x in w["words"]], at
        for x, (_, start, end, probability) in zip(g.words, w["words"]):
            assert isinstance(x, tessel.Word), at
            assert x.start == pytest.approx(start, abs=0.01 + 1e-9), at
            assert x.end == pytest.approx(end, abs=0.01 + 1e-9), at
            assert x.probability == pytest.approx(probability, rel=1e-3, abs=1e-9), at


def run_golden(pipe, run, what, **extra):
    options = dict(copy.deepcopy(run["options"]), **extra)
    segments, info = pipe.transcribe(AUDIOS[run["audio"]], **options)
    assert info.language == run["language"], what
    assert info.language_probability == pytest.approx(run["language_probability"], abs=1e-5)
    assert info.duration == run["duration"], what
    assert info.duration_after_vad == run["duration_after_vad"], what
    assert info.transcription_options["condition_on_previous_text"] is False, what
    return list(segments), info


ENGLISH_RUNS = ["words_timestamps", "vad_dict", "clip_timestamps", "short_no_vad", "silence"]


def test_english_runs_match_faster_whisper():
    e = golden("tiny_en_32")
    pipe = pipeline("tiny_en_32")
    for name in ENGLISH_RUNS:
        run = e["runs"][name]
        segments, info = run_golden(pipe, run, name)
        check_segments(segments, run["segments"], name)
        if name == "clip_timestamps":
            assert info.vad_options is None
            assert info.transcription_options["clip_timestamps"] == [
                {"start": 8000, "end": 144000},
                {"start": 160000, "end": 496000},
            ]
        elif name == "vad_dict":
            # faster-whisper's quirk: a dict's other fields take the plain defaults.
            assert info.vad_options == tessel.VadOptions(threshold=0.5, max_speech_duration_s=30)
        elif name == "short_no_vad":
            assert info.vad_options is None
        else:
            assert info.vad_options == tessel.VadOptions(
                max_speech_duration_s=30, min_silence_duration_ms=160
            )


def test_multilingual_runs_match_faster_whisper():
    """Per-chunk languages over long silences, and a language detected on the chunks."""
    e = golden("tiny_multi_32")
    pipe = pipeline("tiny_multi_32")
    assert pipe.model.is_multilingual
    for name in ["multilingual", "detected_plain"]:
        run = e["runs"][name]
        segments, _ = run_golden(pipe, run, name)
        check_segments(segments, run["segments"], name)


def test_ignored_arguments_and_vad_parameters_as_faster_whisper_takes_them():
    """The arguments faster-whisper's batched pipeline does not read change nothing but the
    reported temperature (the first); the batch size changes nothing; a vad_parameters dict
    loses its max_speech_duration_s (popped from the caller's dict, the chunks still at most
    30 s); a VadOptions is used as it is."""
    e = golden("tiny_en_32")
    pipe = pipeline("tiny_en_32")
    short = e["runs"]["short"]
    ignored = dict(
        temperature=[0.6, 0.0],
        best_of=0,
        prefix="Sea shells",
        compression_ratio_threshold=0.1,
        log_prob_threshold=0.0,
        no_speech_threshold=0.0,
        condition_on_previous_text=True,
        prompt_reset_on_temperature=0.0,
        max_initial_timestamp=float("nan"),
        hallucination_silence_threshold=float("nan"),
        language_detection_threshold=0.99,
        chunk_length=30,
        batch_size=1,
    )
    segments, info = run_golden(pipe, short, "ignored", **ignored)
    check_segments(segments, short["segments"], "ignored", temperature=0.6)
    assert info.transcription_options["temperatures"] == [0.6]
    parameters = {"threshold": 0.5, "max_speech_duration_s": 5}
    vad_dict = e["runs"]["vad_dict"]
    segments, info = run_golden(pipe, vad_dict, "vad_dict", vad_parameters=parameters)
    check_segments(segments, vad_dict["segments"], "vad_dict popped")
    assert parameters == {"threshold": 0.5}
    assert info.vad_options.max_speech_duration_s == 30
    batched = tessel.VadOptions(max_speech_duration_s=30, min_silence_duration_ms=160)
    segments, info = run_golden(pipe, short, "VadOptions", vad_parameters=batched)
    check_segments(segments, short["segments"], "VadOptions")
    assert info.vad_options is batched


def test_a_dropped_iterator_stops_and_frees_its_session():
    e = golden("tiny_en_32")
    run = e["runs"]["clip_timestamps"]
    pipe = pipeline("tiny_en_32", num_workers=1)
    segments, _ = pipe.transcribe(AUDIOS["long"], batch_size=1, **run["options"])
    assert next(segments).id == 1
    del segments
    segments, _ = run_golden(pipe, run, "after a dropped iterator", batch_size=1)
    check_segments(segments, run["segments"], "after a dropped iterator")
    copy_ = pickle.loads(pickle.dumps(pipe))
    assert isinstance(copy_, tessel.BatchedInferencePipeline)
    assert copy_.model.is_multilingual is False


def test_what_tessel_cannot_honour_raises(caplog):
    english = pipeline("tiny_en_32")
    silence = AUDIOS["silence"]
    for kwargs, error, match in [
        (dict(log_progress=True), tessel.UnsupportedError, "log_progress"),
        (dict(chunk_length=20), tessel.UnsupportedError, "chunk_length"),
        # faster-whisper's batched pipeline encodes the prompt as text: TypeError there too.
        (dict(initial_prompt=[50, 51]), TypeError, "initial_prompt"),
        (dict(clip_timestamps="0,5"), tessel.InputError, "clip_timestamps"),
        (dict(clip_timestamps=[0.0, 5.0]), tessel.InputError, "clip_timestamps"),
        (dict(clip_timestamps=[{"start": 0.0}]), tessel.InputError, "clip_timestamps"),
        (dict(clip_timestamps=[{"start": 2.0, "end": 1.0}]), tessel.InputError, "clip"),
        (dict(vad_parameters={"bogus": 1}), tessel.InputError, "vad_parameters"),
        (dict(vad_parameters={"threshold": 2.0}), tessel.InputError, "vad_parameters"),
        (dict(vad_parameters="fast"), tessel.InputError, "vad_parameters"),
        (dict(temperature=[]), tessel.InputError, "temperature"),
        (dict(batch_size=0), tessel.InputError, "batch_size"),
        (dict(beam_size=0), tessel.InputError, "beam_size"),
        (dict(task="summarise"), tessel.InputError, "task"),
        # tessel.WhisperModel's rule: an English-only model is not told another language.
        (dict(language="de"), tessel.InputError, "English-only"),
    ]:
        with pytest.raises(error, match=match):
            english.transcribe(silence, **kwargs)
    # Audio of 30 s or more needs the detector or clips (faster-whisper: RuntimeError).
    with pytest.raises(tessel.InputError, match="30 s"):
        english.transcribe(np.zeros(30 * RATE, dtype=np.float32), vad_filter=False)
    with pytest.raises(TypeError, match="WhisperModel"):
        tessel.BatchedInferencePipeline(object())
    # Only detection reads the segments' count: an English-only model takes any.
    segments, info = english.transcribe(silence, language_detection_segments=3)
    assert (list(segments), info.language, info.duration_after_vad) == ([], "en", 0.0)
    with caplog.at_level(logging.WARNING, logger="tessel"):
        segments, info = english.transcribe(silence, multilingual=True)
    assert "English-only" in caplog.text
    assert info.transcription_options["multilingual"] is False
    multi = pipeline("tiny_multi_32")
    with pytest.raises(tessel.UnsupportedError, match="language_detection_segments"):
        multi.transcribe(silence, language_detection_segments=2)
    segments, info = multi.transcribe(silence, language="de", language_detection_segments=2)
    assert (list(segments), info.language) == ([], "de")
