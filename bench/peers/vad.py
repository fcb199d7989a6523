#!/usr/bin/env python3
"""tessel's Silero VAD against onnxruntime running the same model as faster-whisper does.

    bench/peers/vad.py [--minutes 5] [--threads 2] [--runs 5]

Builds MINUTES of 16 kHz audio from the committed clips of vad/tests/fixtures/ (tiled, each
copy with its own faint noise), then in the same run times:

- onnxruntime: faster-whisper's `SileroVADModel` over the audio padded as
  `get_speech_timestamps` pads it, with faster-whisper's session options
  (`intra_op_num_threads=1`, no memory arena) and with `intra_op_num_threads=THREADS`;
- tessel: `target/release/vad_peer` (bench/src/bin/vad_peer.rs) on the same samples, the
  encoder's GEMMs on THREADS threads.

Each time is the best of RUNS after a warm-up, in seconds of wall time. It prints the CPU,
both times, their ratio, tessel's time as a share of the audio's duration, the largest
difference between the two engines' probabilities, and whether faster-whisper's
`get_speech_timestamps` gives the same chunks from both. Needs `pip install faster-whisper
onnxruntime numpy` and `cargo build --release -p tessel-bench --bin vad_peer`.
"""

import argparse
import glob
import json
import os
import subprocess
import tempfile
import time
import wave

import numpy as np
import onnxruntime
import faster_whisper.vad as fw_vad

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RATE = 16000


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def audio(minutes):
    clips = []
    for path in sorted(glob.glob(os.path.join(ROOT, "vad", "tests", "fixtures", "*.wav"))):
        with wave.open(path) as w:
            clips.append(np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768.0)
    rng = np.random.default_rng(0)
    total = int(minutes * 60 * RATE)
    parts, length = [], 0
    while length < total:
        clip = clips[len(parts) % len(clips)]
        parts.append(clip + rng.normal(0.0, 0.002, len(clip)))
        length += len(clip)
    return np.clip(np.concatenate(parts)[:total], -1, 1).astype(np.float32)


def ort_model(threads):
    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = threads
    opts.enable_cpu_mem_arena = False
    opts.log_severity_level = 4
    model = fw_vad.SileroVADModel.__new__(fw_vad.SileroVADModel)
    model.session = onnxruntime.InferenceSession(
        os.path.join(ROOT, "assets", "silero_vad_v6.onnx"),
        providers=["CPUExecutionProvider"], sess_options=opts)
    return model


def best_time(run, runs):
    run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def timestamps(samples, probabilities):
    saved = fw_vad.get_vad_model
    fw_vad.get_vad_model = lambda: (lambda padded: probabilities)
    try:
        return fw_vad.get_speech_timestamps(samples, fw_vad.VadOptions())
    finally:
        fw_vad.get_vad_model = saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    samples = audio(args.minutes)
    padded = np.pad(samples, (0, 512 - samples.shape[0] % 512))
    seconds = len(samples) / RATE

    results = {}
    for threads in sorted({1, args.threads}):
        model = ort_model(threads)
        results[threads] = best_time(lambda: model(padded.copy()), args.runs)
    reference = ort_model(1)(padded.copy())

    binary = os.path.join(ROOT, "target", "release", "vad_peer")
    with tempfile.TemporaryDirectory() as tmp:
        raw, out = os.path.join(tmp, "audio.f32"), os.path.join(tmp, "probs.f32")
        samples.astype("<f4").tofile(raw)
        line = subprocess.run(
            [binary, raw, "--threads", str(args.threads), "--runs", str(args.runs),
             "--model", os.path.join(ROOT, "assets", "silero_vad_v6.onnx"), "--out", out],
            check=True, capture_output=True, text=True).stdout
        tessel = json.loads(line)
        probabilities = np.fromfile(out, "<f4")

    ort_time = results[args.threads]
    print(f"CPU: {cpu_name()}")
    print(f"audio: {seconds:.1f} s, {len(reference)} windows")
    print(f"onnxruntime {onnxruntime.__version__}, 1 thread (faster-whisper's settings): "
          f"{results[1]:.4f} s")
    if args.threads != 1:
        print(f"onnxruntime, {args.threads} threads: {ort_time:.4f} s")
    print(f"tessel ({tessel['isa']}, {tessel['threads']} threads): "
          f"{tessel['best_seconds']:.4f} s (median {tessel['median_seconds']:.4f} s)")
    print(f"ratio tessel / onnxruntime at {args.threads} threads: "
          f"{tessel['best_seconds'] / ort_time:.3f}; vs 1-thread onnxruntime: "
          f"{tessel['best_seconds'] / results[1]:.3f}")
    print(f"tessel time / audio duration: {100 * tessel['best_seconds'] / seconds:.3f} %")
    print(f"max |probability difference|: {np.abs(probabilities - reference).max():.2e}")
    same = timestamps(samples, probabilities) == timestamps(samples, reference)
    print(f"speech timestamps identical: {same}")


if __name__ == "__main__":
    main()
