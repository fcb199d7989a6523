#!/usr/bin/env python3
"""Builds the voice-activity-detection golden fixture: tests/transcribe/tiny_en_32/vad.json.

Runs faster-whisper's `transcribe(..., vad_filter=True)` (its Silero VAD v6 through
onnxruntime) on the committed English-only fixture model of tools/make_transcribe_golden.py,
over clip.wav placed between silences (3 s, the clip, 4 s, the clip, 1 s), and saves per run
the segments (with their words when timed), the language and both durations. The speech the
detector keeps is transcribed and every time is mapped back to the original audio, so the
fixture proves the detector, the chunking, the transcription of the joined speech and the
restoring of timestamps together.

Usage: /work/pyenv/bin/python tools/make_vad_transcribe_golden.py   (faster-whisper 1.x, onnxruntime)
The Rust and Python tests never need faster-whisper.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_words_golden import ROOT, clip_samples  # noqa: E402

NAME = "tiny_en_32"
RATE = 16000
SILENCES_S = (3, 4, 1)
COMMON = dict(temperature=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], beam_size=1, vad_filter=True)
RUNS = {
    "silence_1s": dict(vad_parameters=dict(min_silence_duration_ms=1000)),
    "silence_1s_words": dict(
        vad_parameters=dict(min_silence_duration_ms=1000), word_timestamps=True
    ),
    "defaults_words": dict(word_timestamps=True),
}


def audio_between_silences(clip):
    first, middle, last = (np.zeros(s * RATE, dtype=np.float32) for s in SILENCES_S)
    return np.concatenate([first, clip, middle, clip, last])


def main():
    import faster_whisper
    from faster_whisper import WhisperModel

    model_dir = os.path.join(ROOT, NAME, "model")
    audio = audio_between_silences(clip_samples(os.path.join(ROOT, "clip.wav")))
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=1)
    expected = dict(
        name=NAME, faster_whisper=faster_whisper.__version__, silences_s=list(SILENCES_S),
        samples=len(audio), runs={},
    )
    for run, options in RUNS.items():
        segments, info = model.transcribe(audio, **COMMON, **options)
        out = []
        for s in segments:
            words = None if s.words is None else [
                [w.word, w.start, w.end, w.probability] for w in s.words
            ]
            out.append(dict(
                seek=s.seek, start=s.start, end=s.end, text=s.text, tokens=list(s.tokens),
                temperature=s.temperature, words=words,
            ))
        options = dict(COMMON, **options)
        expected["runs"][run] = dict(
            options=options, language=info.language, duration=info.duration,
            duration_after_vad=info.duration_after_vad, segments=out,
        )
        print(run, len(out), "segments, %.2f of %.2f s kept" % (
            info.duration_after_vad, info.duration))
    with open(os.path.join(ROOT, NAME, "vad.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
