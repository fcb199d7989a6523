#!/usr/bin/env python3
"""Builds the word-timestamp golden fixtures: tests/transcribe/<name>/words.json.

Runs faster-whisper with `word_timestamps=True` on the committed fixtures of
tools/make_transcribe_golden.py (the same CTranslate2 float16 models under
tests/transcribe/<name>/model/, the same audio: clip.wav and 1.5 s of zeros, 4 times), and saves,
per run, the segments with their words (word, start, end, probability), and the raw result of
CTranslate2's `Whisper.align` (the alignment path and the text tokens' probabilities) of the
first window's call, with its inputs (start sequence, text tokens, num_frames).

The multilingual fixture is run with the language given (`zh`: faster-whisper splits its words
on unicode boundaries, not spaces); faster-whisper is handed a proxy that says the model is
multilingual, as make_transcribe_golden.py does.

Usage: /work/pyenv/bin/python tools/make_words_golden.py   (faster-whisper 1.x, ctranslate2)
The Rust tests (pipeline/tests/suite/words_golden.rs) never need Python.
"""

import json
import os
import sys
import wave

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "transcribe")

# As tools/make_transcribe_golden.py builds the audio (not imported: it needs torch).
REPEATS = 4
GAP_SAMPLES = 24000


def clip_samples(path):
    with wave.open(path, "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


def long_audio(clip):
    gap = np.zeros(GAP_SAMPLES, dtype=np.float32)
    return np.concatenate([part for _ in range(REPEATS) for part in (clip, gap)])

COMMON = dict(temperature=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], word_timestamps=True, vad_filter=False)

# The hallucination_* runs skip the silences around likely hallucinations
# (`hallucination_silence_threshold`); each gives other segments than the same run without.
RUNS = {
    "tiny_en_32": {
        "greedy": dict(beam_size=1),
        "beam5": dict(beam_size=5),
        "hallucination_greedy_1s": dict(beam_size=1, hallucination_silence_threshold=1.0),
        "hallucination_beam5_2s": dict(beam_size=5, hallucination_silence_threshold=2.0),
    },
    "tiny_multi_32": {
        "zh_greedy": dict(beam_size=1, language="zh"),
        "en_beam5": dict(beam_size=5, language="en"),
        "hallucination_en_beam5_1s": dict(beam_size=5, language="en",
                                          hallucination_silence_threshold=1.0),
    },
}


class Recorder:
    """The CTranslate2 model, recording the inputs and results of each `align` call."""

    def __init__(self, model, multilingual):
        self._model = model
        self.is_multilingual = multilingual or model.is_multilingual
        self.calls = []

    def __getattr__(self, name):
        return getattr(self._model, name)

    def align(self, features, start_sequence, text_tokens, num_frames, **kwargs):
        results = self._model.align(features, start_sequence, text_tokens, num_frames, **kwargs)
        frames_list = num_frames if isinstance(num_frames, (list, tuple)) else [num_frames] * len(text_tokens)
        for tokens, frames, result in zip(text_tokens, frames_list, results):
            self.calls.append(dict(
                start_sequence=list(start_sequence), text_tokens=list(tokens),
                num_frames=int(frames),
                alignments=[[int(a), int(b)] for a, b in result.alignments],
                text_token_probs=[float(p) for p in result.text_token_probs],
            ))
        return results


def build(name, runs):
    import ctranslate2
    import faster_whisper
    from faster_whisper import WhisperModel

    model_dir = os.path.join(ROOT, name, "model")
    audio = long_audio(clip_samples(os.path.join(ROOT, "clip.wav")))
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=1)
    inner = model.model
    expected = dict(
        name=name, faster_whisper=faster_whisper.__version__,
        ctranslate2=ctranslate2.__version__, runs={},
    )
    for run, options in runs.items():
        recorder = Recorder(inner, name != "tiny_en_32")
        model.model = recorder
        segments, info = model.transcribe(audio, **COMMON, **options)
        out = []
        for s in segments:
            out.append(dict(
                seek=s.seek, start=s.start, end=s.end, text=s.text, tokens=list(s.tokens),
                temperature=s.temperature,
                words=[[w.word, w.start, w.end, w.probability] for w in s.words],
            ))
        assert {s["temperature"] for s in out} <= {0.0}, run
        if "hallucination_silence_threshold" in options:
            plain = {k: v for k, v in options.items() if k != "hallucination_silence_threshold"}
            without = [s for s in expected["runs"].values() if s["options"] == plain]
            assert without and without[0]["segments"] != out, (run, "the option changes nothing")
        first = recorder.calls[0]
        # The path's margin: how far the chosen steps were from a tie is not visible here;
        # the Rust test compares the path itself.
        expected["runs"][run] = dict(
            options=options, language=info.language, segments=out, align=first,
            align_calls=len(recorder.calls),
        )
        print(name, run, len(out), "segments", sum(len(s["words"]) for s in out), "words",
              len(recorder.calls), "align calls, first path", len(first["alignments"]))
    with open(os.path.join(ROOT, name, "words.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    for name in sys.argv[1:] or list(RUNS):
        build(name, RUNS[name])


if __name__ == "__main__":
    main()
