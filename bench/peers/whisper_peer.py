#!/usr/bin/env python3
"""Whole-file transcription time, tessel (`tessel transcribe`) vs faster-whisper, same model
directory, same WAV file, same beam and thread count, identical segments checked.

    python3 bench/peers/whisper_peer.py MODEL_DIR AUDIO.wav [--beam 1] [--runs 5]
    python3 bench/peers/whisper_peer.py --kernels OUT [--runs 5]   # OUT from make_whisper_en.py

`--kernels OUT` times the model itself on OUT/clip30.wav (one full 30 s window) and the whole
transcription of OUT/clip15.wav, alternating the engines run by run (medians; ratios within the
same run): CTranslate2's encoder (`Whisper.encode` of the 80x3000 log-mel) and its time per
token (`Whisper.generate` from the encoded window, greedy, <|endoftext|> suppressed so that every
run decodes the same number of tokens) at float32 and int8, against tessel's encode ms and ms per
token from the `tessel transcribe --temperatures 0` summary (greedy like CTranslate2's, no
fallback decodings; OUT/ct2 float32 and OUT/ct2_f16 float16 weights, and OUT/ct2 quantised to
int8 at load for the encoder). The same work on both sides: CTranslate2's `encode` stops at the
encoder output and its first decoder step projects the cross-attention K/V, so tessel's encode
is the summary's encoder time, and its cross-K/V time per window, spread over CTranslate2's
tokens, is added to its time per token;
then the whole transcribe of the 15 s clip, faster-whisper int8 against tessel int8 (the float32
directory quantised at load, `--weights int8`), f16 and f32, at temperature 0 only: a random
model's text often falls back to sampling, and the two engines' random draws differ, so
fallback decodings would time different work.

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
import sys
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


def tessel_summary(binary, model_dir, audio, beam, threads, weights=None, fallback=True):
    """encoder ms per window, ms per token (with the window's cross-attention K/V projection
    spread over CT2_TOKENS, as CTranslate2's figure has it), whole ms and segment tokens of one
    `tessel transcribe`
    (`weights`: the `--weights` type, default as the directory stores them; without `fallback`
    only temperature 0 is tried)."""
    args = [binary, "transcribe", "--model", model_dir, audio, "--beam", str(beam),
            "--threads", str(threads), "--format", "json"]
    if weights:
        args += ["--weights", weights]
    if not fallback:
        args += ["--temperatures", "0"]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    err = out.stderr
    seconds = float(re.search(r"audio ([0-9.]+) s", err).group(1))
    rtf = float(re.search(r"real-time factor ([0-9.]+)", err).group(1))
    found = re.search(r"encode ([0-9.]+) ms \+ cross K/V ([0-9.]+) ms over ([0-9]+) windows", err)
    windows = int(found.group(3))
    enc, kv = float(found.group(1)) / windows, float(found.group(2)) / windows
    # CTranslate2 projects the cross-attention K/V in its first decoder step, inside its
    # per-token figure over CT2_TOKENS tokens; tessel does it after the encoder.
    tok = float(re.search(r"([0-9.]+) ms per token", err).group(1)) + kv / CT2_TOKENS
    tokens = [s["tokens"] for s in json.loads(out.stdout)["segments"]]
    return enc, tok, rtf * seconds * 1e3, tokens


# Tokens CTranslate2's `generate` decodes per timing (end of text suppressed).
CT2_TOKENS = 100


def ct2_model(model_dir, threads, compute_type):
    import ctranslate2
    return ctranslate2.models.Whisper(model_dir, device="cpu", compute_type=compute_type,
                                      intra_threads=threads, inter_threads=1)


def ct2_times(model, mel, prompt, eot, n_tokens):
    """CTranslate2 encode ms and greedy ms per token from the encoded window."""
    import ctranslate2
    feats = ctranslate2.StorageView.from_array(mel)
    start = time.perf_counter()
    enc = model.encode(feats, to_cpu=True)
    enc_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    res = model.generate(enc, [prompt], beam_size=1, max_length=n_tokens + len(prompt),
                         suppress_tokens=[eot], suppress_blank=False)
    gen_ms = (time.perf_counter() - start) * 1e3
    n = len(res[0].sequences_ids[0])
    return enc_ms, gen_ms / n


def kernels(out, binary, runs):
    import numpy as np
    import whisper
    audio30 = whisper.audio.load_audio(f"{out}/clip30.wav")
    mel = whisper.audio.log_mel_spectrogram(whisper.audio.pad_or_trim(audio30), 80)
    mel = np.ascontiguousarray(mel.numpy()[None], dtype=np.float32)
    eot, sot, nots = 50256, 50257, 50362
    prompt = [sot, nots]
    clip30, clip15 = f"{out}/clip30.wav", f"{out}/clip15.wav"
    print("| threads | CT2 f32 enc | CT2 int8 enc | tessel f32 enc | tessel f16 enc "
          "| tessel int8 enc | f32/CT2 f32 | f16/CT2 f32 | int8/CT2 f32 | int8/CT2 int8 "
          "| CT2 f32 tok | CT2 int8 tok | tessel f32 tok | tessel f16 tok | f16/CT2 f32 tok "
          "| f16/CT2 int8 tok |")
    print("|" + "---|" * 16)
    rows = {}
    for threads in (1, 2):
        ct = {ct: ct2_model(f"{out}/ct2", threads, ct) for ct in ("float32", "int8")}
        for m in ct.values():
            ct2_times(m, mel, prompt, eot, 8)  # warm-up
        r = {k: [] for k in ("e32", "e8", "t32", "t8", "te32", "te16", "te8", "tt32", "tt16")}
        for _ in range(runs):
            e, t = ct2_times(ct["float32"], mel, prompt, eot, CT2_TOKENS)
            r["e32"].append(e), r["t32"].append(t)
            e, t, _, _ = tessel_summary(binary, f"{out}/ct2", clip30, 1, threads,
                                        fallback=False)
            r["te32"].append(e), r["tt32"].append(t)
            e, t = ct2_times(ct["int8"], mel, prompt, eot, CT2_TOKENS)
            r["e8"].append(e), r["t8"].append(t)
            e, t, _, _ = tessel_summary(binary, f"{out}/ct2_f16", clip30, 1, threads,
                                        fallback=False)
            r["te16"].append(e), r["tt16"].append(t)
            r["te8"].append(tessel_summary(binary, f"{out}/ct2", clip30, 1, threads, "int8",
                                           fallback=False)[0])
        m = {k: statistics.median(v) for k, v in r.items()}
        print(f"| {threads} | {m['e32']:.0f} ms | {m['e8']:.0f} ms | {m['te32']:.0f} ms "
              f"| {m['te16']:.0f} ms | {m['te8']:.0f} ms | {m['te32'] / m['e32']:.2f} "
              f"| {m['te16'] / m['e32']:.2f} | {m['te8'] / m['e32']:.2f} "
              f"| {m['te8'] / m['e8']:.2f} | {m['t32']:.2f} ms | {m['t8']:.2f} ms "
              f"| {m['tt32']:.2f} ms | {m['tt16']:.2f} ms | {m['tt16'] / m['t32']:.2f} "
              f"| {m['tt16'] / m['t8']:.2f} |", flush=True)
        del ct
    print()
    print("| threads | beam | faster-whisper int8 | tessel int8 | tessel f16 | tessel f32 "
          "| int8 / fw int8 | f16 / fw int8 | f32 / fw int8 | same tokens: tessel f32 vs fw f32 "
          "| tessel int8 vs fw int8 |")
    print("|" + "---|" * 10)
    for threads in (1, 2):
        for beam in (1, 5):
            fw = WhisperModel(f"{out}/ct2", device="cpu", compute_type="int8",
                              cpu_threads=threads)
            fw32 = WhisperModel(f"{out}/ct2", device="cpu", compute_type="float32",
                                cpu_threads=threads)
            kw = dict(beam_size=beam, word_timestamps=False, vad_filter=False, temperature=[0.0])
            want = [s.tokens for s in fw32.transcribe(clip15, **kw)[0]]
            want8 = [s.tokens for s in fw.transcribe(clip15, **kw)[0]]
            f, t8, t16, t32, same, same8 = [], [], [], [], True, True
            for _ in range(runs):
                start = time.perf_counter()
                list(fw.transcribe(clip15, **kw)[0])
                f.append((time.perf_counter() - start) * 1e3)
                _, _, w, got8 = tessel_summary(binary, f"{out}/ct2", clip15, beam, threads, "int8",
                                               fallback=False)
                t8.append(w)
                t16.append(tessel_summary(binary, f"{out}/ct2_f16", clip15, beam, threads,
                                          fallback=False)[2])
                _, _, w, got = tessel_summary(binary, f"{out}/ct2", clip15, beam, threads,
                                              fallback=False)
                t32.append(w)
                same, same8 = same and got == want, same8 and got8 == want8
            f, a, b, c = (statistics.median(x) for x in (f, t8, t16, t32))
            print(f"| {threads} | {beam} | {f:.0f} ms | {a:.0f} ms | {b:.0f} ms | {c:.0f} ms "
                  f"| {a / f:.2f} | {b / f:.2f} | {c / f:.2f} | {same} | {same8} |", flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--kernels":
        p = argparse.ArgumentParser()
        p.add_argument("--kernels", required=True)
        p.add_argument("--runs", type=int, default=5)
        p.add_argument("--tessel", default="target/release/tessel")
        a = p.parse_args()
        kernels(a.kernels, a.tessel, a.runs)
        return
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
