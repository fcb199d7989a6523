#!/usr/bin/env python3
"""The Python package's cost over the engine, and two Python threads against one.

Run with the `tessel` package installed (`pip install ./python`) and release binaries built
(`cargo build --release -p tessel-cli -p tessel-bench --bin tessel --bin ct2_peer`):

    python bench/peers/python_overhead.py WHISPER_DIR CLIP.wav MARIAN_DIR LINES.txt [RUNS]

WHISPER_DIR is a CTranslate2 Whisper directory (bench/peers/make_whisper_en.py makes the
tiny.en shape), CLIP.wav about 15 s of speech; MARIAN_DIR a CTranslate2 translation directory
whose random weights never emit EOS and LINES.txt lines of comma-separated source ids
(bench/peers/run_file.py writes both for marian-base). Each figure is the median of RUNS
(default 5) alternated runs, one thread unless said:

1. transcribe: `tessel transcribe` (its own timing of read + transcription, from its
   summary) against `WhisperModel.transcribe` of the same file, segments consumed (the
   model loaded and one warm-up call made first).
2. translate_batch: `ct2_peer --lines` (the file through `tessel_model::Batch`, 64 lines a
   batch, 32 tokens each, its own timing) against `Translator.translate_batch` of the same ids
   as tokens, `max_batch_size=64`, `max_decoding_length=32`.
3. threads: the lines translated by one Python thread on one session, and split between two
   Python threads at once on two sessions (`inter_threads=2`), batches of 32 and
   `intra_threads=1` throughout: throughput ratio; and two transcriptions at once
   (`num_workers=2`, `cpu_threads=1`) against one after the other.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import tessel

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RELEASE = os.path.join(ROOT, "target", "release")


def cli_transcribe_ms(model, clip):
    """`tessel transcribe`'s own read + transcription time."""
    out = subprocess.run(
        [os.path.join(RELEASE, "tessel"), "transcribe", "--model", model, clip, "--threads", "1"],
        capture_output=True, text=True, check=True)
    audio = float(re.search(r"audio ([0-9.]+) s", out.stderr).group(1))
    rtf = float(re.search(r"real-time factor ([0-9.]+)", out.stderr).group(1))
    return audio * rtf * 1e3


def py_transcribe_ms(model, clip):
    start = time.perf_counter()
    segments, _ = model.transcribe(clip)
    list(segments)
    return (time.perf_counter() - start) * 1e3


def peer_file_ms(model, lines_path):
    out = subprocess.run(
        [os.path.join(RELEASE, "ct2_peer"), model, "--lines", lines_path, "--steps", "32",
         "--batch", "64", "--threads", "1", "--runs", "1"],
        capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def py_file_ms(translator, sources, batch=64):
    start = time.perf_counter()
    results = translator.translate_batch(
        sources, beam_size=1, max_batch_size=batch, max_decoding_length=32)
    assert all(len(r.hypotheses[0]) == 32 for r in results)
    return (time.perf_counter() - start) * 1e3


def in_threads(jobs):
    """Wall milliseconds of running every job on its own thread at once."""
    threads = [threading.Thread(target=job) for job in jobs]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter() - start) * 1e3


def main():
    whisper_dir, clip, marian_dir, lines_path = sys.argv[1:5]
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    print("tessel %s, ISA %s, %d runs, load %s" % (
        tessel.__name__, tessel.isa(), runs, os.getloadavg()))
    vocab = json.load(open(os.path.join(marian_dir, "shared_vocabulary.json")))
    ids = [[int(x) for x in line.split(",")] for line in open(lines_path)]
    sources = [[vocab[i] for i in line] for line in ids]

    whisper = tessel.WhisperModel(whisper_dir, cpu_threads=1)
    py_transcribe_ms(whisper, clip)
    cli, py = [], []
    for _ in range(runs):
        cli.append(cli_transcribe_ms(whisper_dir, clip))
        py.append(py_transcribe_ms(whisper, clip))
    print("transcribe: CLI %.0f ms, Python %.0f ms, Python / CLI %.3f" % (
        statistics.median(cli), statistics.median(py),
        statistics.median(py) / statistics.median(cli)))

    translator = tessel.Translator(marian_dir, intra_threads=1, inter_threads=2)
    py_file_ms(translator, sources)
    peer, py = [], []
    for _ in range(runs):
        peer.append(peer_file_ms(marian_dir, lines_path))
        py.append(py_file_ms(translator, sources))
    print("translate_batch: ct2_peer %.0f ms, Python %.0f ms, Python / engine %.3f" % (
        statistics.median(peer), statistics.median(py),
        statistics.median(py) / statistics.median(peer)))

    # Batches of 32 everywhere, so every session has one shape: one Python thread on a
    # translator with one session (its two batches one after the other), against two Python
    # threads with 32 lines each on a translator with two sessions.
    half = len(sources) // 2
    single = tessel.Translator(marian_dir, intra_threads=1, inter_threads=1)
    single_ms = lambda: py_file_ms(single, sources, 32)  # noqa: E731
    first = lambda: py_file_ms(translator, sources[:half], 32)  # noqa: E731
    second = lambda: py_file_ms(translator, sources[half:], 32)  # noqa: E731
    single_ms()
    in_threads([first, second])
    one, two = [], []
    for _ in range(runs):
        one.append(in_threads([single_ms]))
        two.append(in_threads([first, second]))
    print("translate_batch, 2 Python threads: one thread %.0f ms, two %.0f ms, speed-up %.2f" % (
        statistics.median(one), statistics.median(two),
        statistics.median(one) / statistics.median(two)))

    whisper2 = tessel.WhisperModel(whisper_dir, cpu_threads=1, num_workers=2)
    in_threads([lambda: py_transcribe_ms(whisper2, clip)] * 2)
    one, two = [], []
    for _ in range(runs):
        one.append(in_threads([lambda: (py_transcribe_ms(whisper2, clip),
                                        py_transcribe_ms(whisper2, clip))]))
        two.append(in_threads([lambda: py_transcribe_ms(whisper2, clip)] * 2))
    print("transcribe, 2 Python threads: one after the other %.0f ms, at once %.0f ms, "
          "speed-up %.2f" % (statistics.median(one), statistics.median(two),
                             statistics.median(one) / statistics.median(two)))


if __name__ == "__main__":
    main()
