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
        dict(vad_filter=True),
        dict(word_timestamps=True),
        dict(patience=2),
        dict(hotwords="x"),
        dict(clip_timestamps=[1.0, 2.0]),
        dict(initial_prompt=[1, 2]),
        dict(task="summarise"),
        dict(beam_size=0),
        dict(beam_size=5, best_of=99),
        dict(language="de"),
    ]:
        with pytest.raises(tessel.InputError):
            model.transcribe(audio, **kwargs)
    with pytest.raises(tessel.UnsupportedError, match="vad_filter"):
        model.transcribe(audio, vad_filter=True)
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
