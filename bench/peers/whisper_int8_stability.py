#!/usr/bin/env python3
"""How stable each engine's transcript is under an inaudible change of the audio, float32 vs int8.

    python3 bench/peers/whisper_int8_stability.py OUT [--seeds 5] [--tessel target/release/tessel]

OUT is a directory made by make_whisper_en.py (random weights of a real Whisper shape). The
script converts OUT/hf to OUT/ct2_int8 with CTranslate2's int8 quantisation if that is missing,
then makes `--seeds` copies of OUT/clip15.wav in which 0.1 % of the samples, chosen at random,
move by one least significant bit (±1 of 32768), and transcribes the original and every copy
at temperature 0, greedy, 1 thread, with:

- faster-whisper `float32` on OUT/ct2 and `int8` on OUT/ct2_int8;
- tessel with OUT/ct2 (float32) and OUT/ct2_int8 (its int8 weights kept as stored).

For each it prints how many copies give exactly the original's tokens and, for the others, the
index of the first token that differs. An engine whose own transcript changes under such a
perturbation cannot be expected to produce another engine's transcript token for token: their
float parts (the log-mel, norms, attention) differ by ulps, which is the same size of change.
"""

import argparse
import json
import os
import subprocess
import wave

import numpy as np
from faster_whisper import WhisperModel


def perturbed_copies(src, seeds, tmp):
    with wave.open(src) as w:
        params = w.getparams()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).copy()
    paths = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        copy = samples.astype(np.int32)
        idx = rng.choice(len(copy), size=len(copy) // 1000, replace=False)
        copy[idx] += rng.choice([-1, 1], size=len(idx))
        path = os.path.join(tmp, f"perturbed{seed}.wav")
        with wave.open(path, "wb") as out:
            out.setparams(params)
            out.writeframes(np.clip(copy, -32768, 32767).astype(np.int16).tobytes())
        paths.append(path)
    return paths


def faster(model_dir, compute_type):
    model = WhisperModel(model_dir, device="cpu", compute_type=compute_type, cpu_threads=1)
    kw = dict(beam_size=1, word_timestamps=False, vad_filter=False, temperature=[0.0])
    return lambda path: [t for s in model.transcribe(path, **kw)[0] for t in s.tokens]


def tessel(binary, model_dir):
    def run(path):
        args = [binary, "transcribe", "--model", model_dir, path, "--beam", "1", "--threads",
                "1", "--format", "json", "--temperatures", "0"]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        return [t for s in json.loads(out)["segments"] for t in s["tokens"]]
    return run


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--tessel", default="target/release/tessel")
    a = p.parse_args()
    int8_dir = os.path.join(a.out, "ct2_int8")
    if not os.path.isdir(int8_dir):
        from ctranslate2.converters import TransformersConverter
        TransformersConverter(os.path.join(a.out, "hf"),
                              copy_files=["tokenizer.json", "preprocessor_config.json"]
                              ).convert(int8_dir, quantization="int8")
    clip = os.path.join(a.out, "clip15.wav")
    copies = perturbed_copies(clip, a.seeds, a.out)
    engines = [
        ("faster-whisper", "float32", faster(os.path.join(a.out, "ct2"), "float32")),
        ("faster-whisper", "int8", faster(int8_dir, "int8")),
        ("tessel", "float32", tessel(a.tessel, os.path.join(a.out, "ct2"))),
        ("tessel", "int8", tessel(a.tessel, int8_dir)),
    ]
    print(f"| engine | weights | tokens | unchanged of {a.seeds} | first differing token |")
    print("|---|---|---|---|---|")
    for name, weights, run in engines:
        base = run(clip)
        outputs = [run(c) for c in copies]
        changed = [first_difference(o, base) for o in outputs if o != base]
        print(f"| {name} | {weights} | {len(base)} | {a.seeds - len(changed)} "
              f"| {', '.join(map(str, changed)) or '-'} |", flush=True)


if __name__ == "__main__":
    main()
