#!/usr/bin/env python3
"""Batched transcription time, tessel (`tessel transcribe --batch-size N`) against faster-whisper's
`BatchedInferencePipeline(model).transcribe(audio, batch_size=N)`, and against tessel's own
sequential transcription of the same file (plain, and with `--vad`).

    python3 bench/peers/whisper_batched.py MODEL_DIR [--audio talk.wav] [--runs 5] [--threads 2]

MODEL_DIR is a CTranslate2 Whisper directory (e.g. OUT/ct2 of make_whisper_en.py). Without
`--audio`, a two-minute recording is synthesised first (espeak-ng paragraphs separated by
0.7-4 s of silence, repeated to 120 s, 16 kHz mono; needs espeak-ng and faster-whisper's PyAV).
Each engine transcribes the file `--runs` times after a warm-up, engines alternating run by run;
the median wall time of the transcription call is reported (faster-whisper: the whole
`transcribe` iterated, which reads the file, runs the VAD, computes the features, encodes and
decodes; tessel: the summary's real-time factor times the audio length, which covers the same;
model loading is excluded from both). Language given (`en`), beam 5, int8 (faster-whisper's
compute_type int8, tessel `--weights int8` on the same float32 directory) and float32.
At float32 the two engines' texts must be identical (checked); at int8 each quantises on its
own, so the share of identical segments is reported.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PARAGRAPHS = [
    "The history of computing is a story of machines that grew smaller, faster and cheaper "
    "with every decade. Early computers filled entire rooms and consumed enormous power.",
    "Today a phone in your pocket holds more processing power than the machines that guided "
    "astronauts to the moon. Yet the basic ideas behind these devices have changed little.",
    "Speech recognition is one of the oldest problems in artificial intelligence. Researchers "
    "in the nineteen fifties built systems that could recognise single spoken digits.",
    "Modern systems are trained on hundreds of thousands of hours of audio, and they "
    "transcribe conversations, lectures and meetings in dozens of languages.",
    "Running such models on ordinary processors requires careful engineering. Memory "
    "bandwidth, cache sizes and vector instructions matter as much as the arithmetic.",
    "When many requests arrive at once, grouping them into batches lets the processor read "
    "the model's weights once for several sequences instead of once for each.",
    "This recording was produced by a speech synthesiser. It contains pauses of different "
    "lengths between paragraphs, so that voice activity detection has something to remove.",
    "Thank you for listening. The end of this test recording follows after a short silence.",
]
GAPS = [1.0, 2.5, 0.7, 3.0, 1.5, 2.0, 4.0, 1.0]


def synthesise(path, seconds=120):
    """espeak-ng paragraphs and silences, repeated to `seconds`, 16 kHz mono int16."""
    import wave

    import av
    import numpy as np

    def read(wav):
        container = av.open(wav)
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
        frames = [g.to_ndarray().reshape(-1) for f in container.decode(audio=0)
                  for g in resampler.resample(f)]
        frames += [g.to_ndarray().reshape(-1) for g in resampler.resample(None)]
        return np.concatenate(frames)

    pieces = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (text, gap) in enumerate(zip(PARAGRAPHS, GAPS)):
            raw = os.path.join(tmp, f"p{i}.wav")
            subprocess.run(["espeak-ng", "-v", "en", "-s", "140", "-w", raw, text], check=True)
            pieces += [read(raw), np.zeros(int(gap * 16000), np.int16)]
    pcm = np.concatenate(pieces)
    while len(pcm) < seconds * 16000:
        pcm = np.concatenate([pcm, pcm])
    pcm = pcm[: seconds * 16000]
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())


def faster(model_dir, audio, threads, compute_type, batch):
    """A callable timing one batched transcription; returns (seconds, segment texts)."""
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    model = WhisperModel(model_dir, device="cpu", compute_type=compute_type, cpu_threads=threads)
    pipeline = BatchedInferencePipeline(model)

    def run():
        start = time.perf_counter()
        segments, _ = pipeline.transcribe(audio, batch_size=batch, language="en", beam_size=5)
        texts = [s.text for s in segments]
        return time.perf_counter() - start, texts

    return run


def tessel(binary, model_dir, audio, threads, weights, extra):
    """A callable timing one `tessel transcribe`; returns (seconds, segment texts)."""

    def run():
        args = [binary, "transcribe", audio, "--model", model_dir, "--threads", str(threads),
                "--language", "en", "--beam", "5", "--format", "json", *extra]
        if weights:
            args += ["--weights", weights]
        done = subprocess.run(args, capture_output=True, text=True, check=True)
        summary = done.stderr
        audio_s = float(re.search(r"audio ([0-9.]+) s", summary).group(1))
        rtf = float(re.search(r"real-time factor ([0-9.]+)", summary).group(1))
        texts = [s["text"] for s in json.loads(done.stdout)["segments"]]
        return rtf * audio_s, texts

    return run


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--audio")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tessel", default="target/release/tessel")
    p.add_argument("--kinds", default="int8,float32", help="int8, float32 or both")
    a = p.parse_args()
    audio = a.audio or os.path.join(tempfile.gettempdir(), "tessel-talk120.wav")
    if not os.path.exists(audio):
        synthesise(audio)
    batched = ["--batch-size", str(a.batch)]
    kinds = [("int8", "int8", "int8"), ("float32", "float32", None)]
    for kind, fw_type, weights in [k for k in kinds if k[0] in a.kinds.split(",")]:
        engines = {
            "faster-whisper batched": faster(a.model, audio, a.threads, fw_type, a.batch),
            "tessel batched": tessel(a.tessel, a.model, audio, a.threads, weights, batched),
            "tessel sequential": tessel(a.tessel, a.model, audio, a.threads, weights, []),
            "tessel sequential --vad": tessel(a.tessel, a.model, audio, a.threads, weights,
                                              ["--vad"]),
        }
        times = {name: [] for name in engines}
        texts = {name: run()[1] for name, run in engines.items()}  # warm-up
        for _ in range(a.runs):
            for name, run in engines.items():
                times[name].append(run()[0])
        fw = statistics.median(times["faster-whisper batched"])
        print(f"{kind}, beam 5, batch {a.batch}, {a.threads} thread(s), {a.runs} runs:")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"  {name:26s} {m:7.2f} s (min {min(ts):.2f}, max {max(ts):.2f})  "
                  f"/ faster-whisper {m / fw:.2f}")
        same = texts["tessel batched"] == texts["faster-whisper batched"]
        agree = sum(x == y for x, y in zip(texts["tessel batched"],
                                             texts["faster-whisper batched"]))
        print(f"  batched texts identical: {same} ({agree} of "
              f"{len(texts['faster-whisper batched'])} segments equal)")
        if kind == "float32" and not same:
            sys.exit("float32 texts differ")


if __name__ == "__main__":
    main()
