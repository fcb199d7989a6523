#!/usr/bin/env python3
"""Whole-file transcription time, tessel (`tessel transcribe`) vs faster-whisper, same model
directory, same WAV file, same beam and thread count, identical segments checked.

    python3 bench/peers/whisper_peer.py MODEL_DIR AUDIO.wav [--beam 1] [--runs 5]

Each engine transcribes the file `--runs` times after a warm-up; the median wall time of the
`transcribe` call is reported (faster-whisper: `list(model.transcribe(path, ...))`, which reads
and resamples the file, computes the features, encodes and decodes; tessel: the summary's
real-time factor times the audio length, which covers read, mel, encode and decode; model
loading is excluded from both). faster-whisper runs at compute_type float32 and int8, tessel
with the weights as the directory stores them.
"""

import argparse
import json
import re
import statistics
import subprocess
import time

from faster_whisper import WhisperModel


def faster(model_dir, audio, beam, threads, compute_type, runs):
    model = WhisperModel(model_dir, device="cpu", compute_type=compute_type, cpu_threads=threads)
    kw = dict(beam_size=beam, word_timestamps=False, vad_filter=False)
    tokens = [s.tokens for s in model.transcribe(audio, **kw)[0]]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        list(model.transcribe(audio, **kw)[0])
        times.append(time.perf_counter() - start)
    return statistics.median(times), tokens


def tessel(binary, model_dir, audio, beam, threads, runs):
    args = [binary, "transcribe", "--model", model_dir, audio, "--beam", str(beam),
            "--threads", str(threads), "--format", "json"]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    tokens = [s["tokens"] for s in json.loads(out.stdout)["segments"]]
    times = []
    for _ in range(runs):
        err = subprocess.run(args, capture_output=True, text=True, check=True).stderr
        seconds = float(re.search(r"audio ([0-9.]+) s", err).group(1))
        rtf = float(re.search(r"real-time factor ([0-9.]+)", err).group(1))
        times.append(rtf * seconds)
    return statistics.median(times), tokens


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("audio")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tessel", default="target/release/tessel")
    a = p.parse_args()
    print("| threads | beam | faster-whisper f32 | faster-whisper int8 | tessel | tessel / fw int8 | same segments |")
    print("|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        f32, want = faster(a.model, a.audio, a.beam, threads, "float32", a.runs)
        i8, _ = faster(a.model, a.audio, a.beam, threads, "int8", a.runs)
        t, got = tessel(a.tessel, a.model, a.audio, a.beam, threads, a.runs)
        print(f"| {threads} | {a.beam} | {f32 * 1e3:.1f} ms | {i8 * 1e3:.1f} ms | {t * 1e3:.1f} ms "
              f"| {t / i8:.2f} | {got == want} |")


if __name__ == "__main__":
    main()
