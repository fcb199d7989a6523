#!/usr/bin/env python3
"""What word timestamps cost: `tessel transcribe` with and without `--word-timestamps`, and
faster-whisper's `WhisperModel.transcribe` with `word_timestamps` True and False, on the same
file, model and threads.

    python3 bench/peers/whisper_words.py MODEL_DIR [--audio talk.wav] [--runs 3] [--threads 2]
        [--beam 5] [--kind float32|int8]

MODEL_DIR is a CTranslate2 Whisper directory (e.g. OUT/ct2 of make_whisper_en.py). Without
`--audio` the two-minute espeak-ng recording of whisper_batched.py is made. The four runs
alternate run by run after a warm-up; medians of the transcription call (faster-whisper: the
whole `transcribe` iterated; tessel: the summary's real-time factor times the audio length;
model loading excluded from both).

Reported per engine: the time with words over the time without, the windows each walk decoded
and the tokens it kept (with word timestamps the reference starts the next window at the last
word's end, so the walk itself changes), and for tessel the summary's `word alignment` (the
forced pass, the heads' attention, DTW and the words) as a share of the time with words: the
feature's own cost. At float32 the two engines' segments must be identical (checked), so both
walk the same windows.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from whisper_batched import synthesise  # noqa: E402


def faster(model_dir, audio, threads, compute_type, beam, words):
    """A callable timing one faster-whisper transcription; returns (seconds, texts, windows)."""
    import time

    from faster_whisper import WhisperModel

    model = WhisperModel(model_dir, device="cpu", compute_type=compute_type, cpu_threads=threads)

    def run():
        start = time.perf_counter()
        segments, _ = model.transcribe(audio, language="en", beam_size=beam,
                                       word_timestamps=words)
        segments = list(segments)
        seconds = time.perf_counter() - start
        return seconds, [s.text for s in segments], len({s.seek for s in segments}), None

    return run


def tessel(binary, model_dir, audio, threads, weights, beam, words):
    """A callable timing one `tessel transcribe`; returns (seconds, texts, windows, alignment)."""

    def run():
        args = [binary, "transcribe", audio, "--model", model_dir, "--threads", str(threads),
                "--language", "en", "--beam", str(beam), "--format", "json"]
        if weights:
            args += ["--weights", weights]
        if words:
            args.append("--word-timestamps")
        done = subprocess.run(args, capture_output=True, text=True, check=True)
        summary = done.stderr
        audio_s = float(re.search(r"audio ([0-9.]+) s", summary).group(1))
        rtf = float(re.search(r"real-time factor ([0-9.]+)", summary).group(1))
        windows = int(re.search(r"over ([0-9]+) windows", summary).group(1))
        aligned = re.search(r"word alignment ([0-9.]+) ms", summary)
        texts = [s["text"] for s in json.loads(done.stdout)["segments"]]
        alignment = float(aligned.group(1)) / 1000 if aligned else None
        return rtf * audio_s, texts, windows, alignment

    return run


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--audio")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--kind", default="float32", choices=["float32", "int8"])
    p.add_argument("--tessel", default="target/release/tessel")
    a = p.parse_args()
    audio = a.audio or os.path.join(tempfile.gettempdir(), "tessel-talk120.wav")
    if not os.path.exists(audio):
        synthesise(audio)
    weights = "int8" if a.kind == "int8" else None
    engines = {}
    for words in (False, True):
        engines[("faster-whisper", words)] = faster(a.model, audio, a.threads, a.kind, a.beam,
                                                    words)
        engines[("tessel", words)] = tessel(a.tessel, a.model, audio, a.threads, weights, a.beam,
                                            words)
    results = {key: run() for key, run in engines.items()}  # warm-up
    times = {key: [] for key in engines}
    aligned = []
    for _ in range(a.runs):
        for key, run in engines.items():
            seconds, _, _, alignment = run()
            times[key].append(seconds)
            if alignment is not None:
                aligned.append(alignment / seconds)
    print(f"{a.kind}, beam {a.beam}, {a.threads} thread(s), {a.runs} runs:")
    for engine in ("faster-whisper", "tessel"):
        off, on = (statistics.median(times[(engine, w)]) for w in (False, True))
        windows = [results[(engine, w)][2] for w in (False, True)]
        segments = [len(results[(engine, w)][1]) for w in (False, True)]
        what = "windows" if engine == "tessel" else "windows with text"
        print(f"  {engine:15s} without {off:6.2f} s, with {on:6.2f} s: {on / off:.3f}x; {what} "
              f"{windows[0]} -> {windows[1]}, segments {segments[0]} -> {segments[1]}")
    print(f"  tessel's word alignment: {statistics.median(aligned):.1%} of the time with words "
          f"(min {min(aligned):.1%}, max {max(aligned):.1%})")
    for words in (False, True):
        same = results[("tessel", words)][1] == results[("faster-whisper", words)][1]
        print(f"  word_timestamps={words}: segments identical: {same}")
        if a.kind == "float32" and not same:
            sys.exit("float32 segments differ")


if __name__ == "__main__":
    main()
