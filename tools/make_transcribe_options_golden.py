#!/usr/bin/env python3
"""Builds the transcription options golden fixture: tests/transcribe/tiny_en_32/options.json.

Runs faster-whisper's `transcribe` with the decoding options of its `TranscriptionOptions` that
change the prompt or CTranslate2's `generate` call (hotwords, prefix, repetition_penalty,
no_repeat_ngram_size, max_new_tokens, suppress_tokens as a list, initial_prompt as token ids)
and the windows (clip_timestamps), on the committed English-only fixture model of tools/make_transcribe_golden.py and the same
audio (clip.wav and 1.5 s of zeros, 4 times), and saves per run the options and the segments
(seek, start, end, text, tokens, temperature, avg_logprob, compression_ratio, no_speech_prob).

Each run is checked to stay at temperature 0 (sampled fallbacks draw from another generator
than tessel's) and to give other segments than the same run without the option: every fixture
proves its option does something.

Usage: /work/pyenv/bin/python tools/make_transcribe_options_golden.py   (faster-whisper 1.2.1)
The Rust and Python tests never need faster-whisper.
"""

import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_words_golden import REPEATS, GAP_SAMPLES, ROOT, clip_samples, long_audio  # noqa: E402

NAME = "tiny_en_32"
COMMON = dict(temperature=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], word_timestamps=False, vad_filter=False)
# name: options; each run is also made without its option and must differ from that.
RUNS = {
    "hotwords": dict(beam_size=1, hotwords="lemons"),
    "hotwords_beam5": dict(beam_size=5, hotwords="The quick fox"),
    "hotwords_and_prefix": dict(beam_size=1, hotwords="lemons", prefix="The quick"),
    "prefix": dict(beam_size=1, prefix="Sea shells"),
    "prefix_beam5": dict(beam_size=5, prefix="Sea shells"),
    "prefix_plain": dict(beam_size=1, prefix="Sea shells", without_timestamps=True),
    "repetition_penalty": dict(beam_size=1, repetition_penalty=1.5),
    "repetition_penalty_beam5": dict(beam_size=5, repetition_penalty=1.5),
    "no_repeat_ngram_size": dict(beam_size=1, no_repeat_ngram_size=3),
    "no_repeat_ngram_size_beam5": dict(beam_size=5, no_repeat_ngram_size=3),
    "max_new_tokens": dict(beam_size=1, max_new_tokens=20),
    "suppress_tokens": dict(beam_size=1, suppress_tokens=[300, 301, 302]),
    "initial_prompt_ids": dict(beam_size=1, initial_prompt=[100, 101, 102]),
    "clip_timestamps_text": dict(beam_size=1, clip_timestamps="3,12.5"),
    "clip_timestamps_open": dict(beam_size=1, clip_timestamps=[5.0, 20.0, 31.0]),
    "clip_timestamps_beam5": dict(beam_size=5, clip_timestamps=[0.0, 8.005, 10.0, 40.0]),
}
# What a run without its option is (the default of each option).
DEFAULTS = dict(
    hotwords=None, prefix=None, repetition_penalty=1, no_repeat_ngram_size=0,
    max_new_tokens=None, suppress_tokens=[-1], initial_prompt=None, clip_timestamps="0",
)


def segments(model, audio, options):
    # faster-whisper extends a suppress_tokens list in place: give it a copy.
    found, _ = model.transcribe(audio, **COMMON, **copy.deepcopy(options))
    return [
        dict(
            seek=s.seek, start=s.start, end=s.end, text=s.text, tokens=list(s.tokens),
            temperature=s.temperature, avg_logprob=s.avg_logprob,
            compression_ratio=s.compression_ratio, no_speech_prob=s.no_speech_prob,
        )
        for s in found
    ]


def main():
    import faster_whisper
    from faster_whisper import WhisperModel

    model_dir = os.path.join(ROOT, NAME, "model")
    audio = long_audio(clip_samples(os.path.join(ROOT, "clip.wav")))
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=1)
    expected = dict(
        name=NAME, faster_whisper=faster_whisper.__version__, repeats=REPEATS,
        gap_samples=GAP_SAMPLES, samples=len(audio), runs={},
    )
    for run, options in RUNS.items():
        out = segments(model, audio, options)
        temps = {s["temperature"] for s in out}
        assert temps == {0.0}, (run, temps)
        plain = {k: (DEFAULTS[k] if k in DEFAULTS else v) for k, v in options.items()}
        assert plain != options, run
        assert segments(model, audio, plain) != out, (run, "the option changes nothing")
        expected["runs"][run] = dict(options=dict(COMMON, **options), segments=out)
        print(run, len(out), "segments", sum(len(s["tokens"]) for s in out), "tokens")
    with open(os.path.join(ROOT, NAME, "options.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
