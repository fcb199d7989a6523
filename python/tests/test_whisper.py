"""tessel.WhisperModel against faster-whisper's transcribe on the random-weight Whisper
fixtures of tests/transcribe (their reference segments were made by tools/
make_transcribe_golden.py with faster-whisper): the same calls, the same segments."""

import json
import pickle
import threading

import numpy as np
import pytest

import tessel
from conftest import TESTS, read_wav

TRANSCRIBE = TESTS / "transcribe"


def expected(name):
    return json.loads((TRANSCRIBE / name / "expected.json").read_text())


def long_audio(e):
    """clip.wav, each copy followed by `gap_samples` zeros, `repeats` times (as the script
    built the reference's audio)."""
    clip = read_wav(TRANSCRIBE / "clip.wav")
    gap = np.zeros(e["gap_samples"], dtype=np.float32)
    audio = np.concatenate([np.concatenate([clip, gap]) for _ in range(e["repeats"])])
    assert len(audio) == e["samples"]
    return audio


def check_segments(got, want, what):
    assert [s.seek for s in got] == [w["seek"] for w in want], what
    for i, (g, w) in enumerate(zip(got, want)):
        at = "%s segment %d" % (what, i)
        assert g.id == i + 1, at
        assert g.tokens == w["tokens"], at
        assert g.text == w["text"], at
        assert g.start == pytest.approx(w["start"], abs=1e-9), at
        assert g.end == pytest.approx(w["end"], abs=1e-9), at
        assert g.temperature == w["temperature"], at
        assert g.compression_ratio == pytest.approx(w["compression_ratio"], rel=1e-12), at
        assert abs(g.avg_logprob - w["avg_logprob"]) < 2e-4, at
        assert abs(g.no_speech_prob - w["no_speech_prob"]) < 1e-4, at
        assert g.words is None


@pytest.mark.parametrize("name", ["tiny_en_32", "tiny_multi_32"])
def test_segments_match_faster_whisper(name):
    e = expected(name)
    audio = long_audio(e)
    # The multilingual fixture's vocabulary is small: the reference was told it is
    # multilingual (tools/make_transcribe_golden.py), and so is tessel.
    multilingual = name == "tiny_multi_32"
    model = tessel.WhisperModel(
        str(TRANSCRIBE / name / "model"), multilingual_model=multilingual or None
    )
    assert model.is_multilingual == multilingual
    for run_name, run in e["runs"].items():
        segments, info = model.transcribe(audio, **run["options"])
        assert info.language == run["language"], run_name
        assert info.duration == pytest.approx(e["samples"] / 16000)
        if "language" in run["options"] or name == "tiny_en_32":
            assert info.language_probability == 1.0
        else:
            assert 0 < info.language_probability <= 1
        check_segments(list(segments), run["segments"], "%s %s" % (name, run_name))


def test_decoding_options_match_faster_whisper():
    """hotwords, prefix, repetition_penalty, no_repeat_ngram_size, max_new_tokens,
    suppress_tokens as a list, initial_prompt as token ids and clip_timestamps against
    faster-whisper's
    (tools/make_transcribe_options_golden.py): each run's segments differ from the run without
    its option, and tessel's are the reference's."""
    e = json.loads((TRANSCRIBE / "tiny_en_32" / "options.json").read_text())
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"))
    audio = long_audio(e)
    for run_name, run in e["runs"].items():
        segments, info = model.transcribe(audio, **run["options"])
        for name in ("hotwords", "prefix", "repetition_penalty", "no_repeat_ngram_size"):
            if name in run["options"]:
                assert info.transcription_options[name] == run["options"][name], run_name
        check_segments(list(segments), run["segments"], run_name)


@pytest.mark.parametrize("name", ["tiny_en_32", "tiny_multi_32"])
def test_words_match_faster_whisper(name):
    """`word_timestamps=True` against faster-whisper's (tools/make_words_golden.py): the
    segments as faster-whisper moves them after its word pass, every word's text, its times
    within 10 ms (both round to 2 decimals) and its probability within 0.1 %."""
    words = json.loads((TRANSCRIBE / name / "words.json").read_text())
    audio = long_audio(expected(name))
    multilingual = name == "tiny_multi_32"
    model = tessel.WhisperModel(
        str(TRANSCRIBE / name / "model"), multilingual_model=multilingual or None
    )
    for run_name, run in words["runs"].items():
        segments, info = model.transcribe(audio, word_timestamps=True, **run["options"])
        assert info.language == run["language"], run_name
        assert info.transcription_options["word_timestamps"] is True
        segments = list(segments)
        assert len(segments) == len(run["segments"]), run_name
        for i, (g, w) in enumerate(zip(segments, run["segments"])):
            at = "%s %s segment %d" % (name, run_name, i)
            assert (g.seek, g.tokens, g.text) == (w["seek"], w["tokens"], w["text"]), at
            assert (g.start, g.end) == pytest.approx((w["start"], w["end"]), abs=1e-9), at
            assert [x.word for x in g.words] == [x[0] for x in w["words"]], at
            for got, (_, start, end, probability) in zip(g.words, w["words"]):
                assert isinstance(got, tessel.whisper.Word), at
                assert got.start == pytest.approx(start, abs=0.01 + 1e-9), at
                assert got.end == pytest.approx(end, abs=0.01 + 1e-9), at
                assert got.probability == pytest.approx(probability, rel=1e-3, abs=1e-9), at


def test_vad_filter_matches_faster_whisper():
    """`vad_filter=True` against faster-whisper's (tools/make_vad_transcribe_golden.py): the
    built-in Silero VAD keeps the same speech, which transcribes to the same segments, their
    times (and their words') mapped back to the original audio."""
    e = json.loads((TRANSCRIBE / "tiny_en_32" / "vad.json").read_text())
    clip = read_wav(TRANSCRIBE / "clip.wav")
    first, middle, last = (np.zeros(s * 16000, dtype=np.float32) for s in e["silences_s"])
    audio = np.concatenate([first, clip, middle, clip, last])
    assert len(audio) == e["samples"]
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"))
    for run_name, run in e["runs"].items():
        segments, info = model.transcribe(audio, **run["options"])
        assert info.language == run["language"], run_name
        assert info.duration == pytest.approx(run["duration"]), run_name
        assert info.duration_after_vad == pytest.approx(run["duration_after_vad"]), run_name
        assert isinstance(info.vad_options, tessel.VadOptions), run_name
        given = run["options"].get("vad_parameters") or {}
        assert info.vad_options.min_silence_duration_ms == given.get(
            "min_silence_duration_ms", 2000
        )
        segments = list(segments)
        assert len(segments) == len(run["segments"]), run_name
        timed = run["options"].get("word_timestamps", False)
        bound = 0.01 + 1e-9 if timed else 1e-9
        for i, (g, w) in enumerate(zip(segments, run["segments"])):
            at = "%s segment %d" % (run_name, i)
            assert (g.seek, g.tokens, g.text) == (w["seek"], w["tokens"], w["text"]), at
            assert g.start == pytest.approx(w["start"], abs=bound), at
            assert g.end == pytest.approx(w["end"], abs=bound), at
            if not timed:
                assert g.words is None and w["words"] is None, at
                continue
            assert [x.word for x in g.words] == [x[0] for x in w["words"]], at
            for got, (_, start, end, probability) in zip(g.words, w["words"]):
                assert got.start == pytest.approx(start, abs=bound), at
                assert got.end == pytest.approx(end, abs=bound), at
                assert got.probability == pytest.approx(probability, rel=1e-3, abs=1e-9), at


def test_silence_alone_under_vad_filter_has_no_segments():
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"))
    segments, info = model.transcribe(np.zeros(5 * 16000, dtype=np.float32), vad_filter=True)
    assert list(segments) == []
    assert (info.language, info.duration, info.duration_after_vad) == ("en", 5.0, 0.0)


def test_a_wav_path_reads_as_its_samples():
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"))
    path = TRANSCRIBE / "clip.wav"
    from_path, info = model.transcribe(path, beam_size=1)
    from_array, _ = model.transcribe(read_wav(path), beam_size=1)
    want = [s.tokens for s in from_array]
    assert [s.tokens for s in from_path] == want
    assert info.duration == pytest.approx(len(read_wav(path)) / 16000)
    # float64 and list input convert to float32 samples
    as_list, _ = model.transcribe(read_wav(path).astype(np.float64), beam_size=1)
    assert [s.text for s in as_list] == [s.text for s in model.transcribe(path, beam_size=1)[0]]
    # a binary file object holding the WAV file
    with open(path, "rb") as f:
        from_file, _ = model.transcribe(f, beam_size=1)
        assert [s.tokens for s in from_file] == want


def test_segments_come_lazily_and_a_dropped_iterator_frees_its_session():
    e = expected("tiny_en_32")
    audio = long_audio(e)
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"), num_workers=1)
    segments, _ = model.transcribe(audio, beam_size=1)
    first = next(segments)
    assert first.id == 1
    del segments
    # The one session is given back once the dropped transcription stops; a new call gets it.
    done = []
    worker = threading.Thread(
        target=lambda: done.append(list(model.transcribe(audio, beam_size=1)[0]))
    )
    worker.start()
    worker.join(timeout=120)
    assert done, "a second transcription did not get the session back"
    check_segments(done[0], e["runs"]["greedy"]["segments"], "after a dropped iterator")


def test_bad_calls_raise_typed_errors(tmp_path):
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"))
    audio = np.zeros(16000, dtype=np.float32)
    for kwargs in [
        dict(vad_filter=True, vad_parameters=dict(threshold=2.0)),
        dict(vad_filter=True, vad_parameters=dict(bogus=1)),
        dict(vad_filter=True, vad_parameters="fast"),
        dict(patience=0),
        dict(beam_size=2, patience=0.2),
        dict(word_timestamps=True, hallucination_silence_threshold=float("nan")),
        dict(clip_timestamps=[-1.0, 2.0]),
        dict(clip_timestamps="1,x"),
        dict(repetition_penalty=0),
        dict(suppress_tokens=[-5]),
        dict(initial_prompt=[10**6]),
        dict(task="summarise"),
        dict(beam_size=0),
        dict(beam_size=5, best_of=99),
        dict(language="de"),
    ]:
        with pytest.raises(tessel.InputError):
            model.transcribe(audio, **kwargs)
    with pytest.raises(tessel.UnsupportedError, match="multilingual"):
        model.transcribe(audio, multilingual=True)
    # As faster-whisper, a window whose prompt and max_new_tokens pass the model's 448
    # positions raises when it is decoded.
    segments, _ = model.transcribe(audio, max_new_tokens=1000)
    with pytest.raises(tessel.InputError, match="max_new_tokens"):
        list(segments)
    for bad in [np.zeros((2, 16000), dtype=np.float32), np.zeros(10, dtype=np.float32)]:
        with pytest.raises(tessel.InputError):
            model.transcribe(bad)
    with pytest.raises(tessel.InputError):
        model.transcribe(tmp_path / "missing.wav")
    (tmp_path / "bad.wav").write_bytes(b"RIFF....WAVEfmt nonsense")
    with pytest.raises(tessel.InputError):
        model.transcribe(tmp_path / "bad.wav")
    with open(tmp_path / "bad.wav", "rb") as f, pytest.raises(tessel.InputError):
        model.transcribe(f)
    with open(TRANSCRIBE / "clip.wav", "r", encoding="latin-1") as f, pytest.raises(
        tessel.InputError, match="binary"
    ):
        model.transcribe(f)
    with pytest.raises(tessel.LoadError):
        tessel.WhisperModel(str(tmp_path / "missing"))
    with pytest.raises(tessel.InputError):
        tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"), device="cuda")
    with pytest.raises(tessel.LoadError):
        tessel.WhisperModel(str(TESTS / "translation" / "marian" / "hf"))


def test_a_model_pickles_and_works_after_fork():
    from test_translator import run_in_fork

    audio = read_wav(TRANSCRIBE / "clip.wav")
    model = tessel.WhisperModel(str(TRANSCRIBE / "tiny_en_32" / "model"), cpu_threads=2)
    want = [s.tokens for s in model.transcribe(audio, beam_size=2)[0]]
    copy = pickle.loads(pickle.dumps(model))
    assert [s.tokens for s in copy.transcribe(audio, beam_size=2)[0]] == want
    assert run_in_fork(lambda: [s.tokens for s in model.transcribe(audio, beam_size=2)[0]]) == want
