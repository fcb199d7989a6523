"""Side-by-side comparison of tessel and CTranslate2 on the same CTranslate2 model directory.

Run through bench/peers/run.sh, which prepares the virtual environment and the tessel binary.
Builds a random-weight Transformer-base (6+6 layers, d_model 512, 8 heads, d_ff 2048, vocab 32000)
with CTranslate2's spec API (make_model.py; float32, plus an int8 copy of the same weights),
runs every scenario through CTranslate2 (compute_type float32 at 1 and 2 intra_threads, int8 at
1 thread for reference) and through tessel (bench/src/bin/ct2_peer.rs), checks that both emit
identical tokens, and prints a table of median times (encode + search, batch 1).

EOS cannot end a search on either side: make_model.py sets its output bias to -1e4, CTranslate2
gets min_decoding_length = max_decoding_length = steps and tessel stop_at_eos = false, so every
run decodes exactly `steps` tokens.
"""

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import ctranslate2

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")
VOCAB = 32000
SCENARIOS = [  # (name, source length, steps, beam)
    ("32 -> 32 greedy", 32, 32, 1),
    ("128 -> 128 greedy", 128, 128, 1),
    ("32 -> 32 beam 4", 32, 32, 4),
]


def source(n):
    return [3 + (i * 7919 + 104729) % (VOCAB - 3) for i in range(n)]


def ensure_model(name, quantization):
    out = os.path.join(MODELS, name)
    if not os.path.isfile(os.path.join(out, "model.bin")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_model.py"), out,
                        "--quantization", quantization, "--seed", "7", "--gain", "0.5"], check=True)
    return out


def ct2_run(model, compute_type, threads, src_ids, steps, beam, runs):
    vocab = json.load(open(os.path.join(model, "shared_vocabulary.json")))
    translator = ctranslate2.Translator(model, device="cpu", compute_type=compute_type,
                                        intra_threads=threads, inter_threads=1)
    batch = [[vocab[i] for i in src_ids]]
    kwargs = dict(beam_size=beam, max_decoding_length=steps, min_decoding_length=steps,
                  num_hypotheses=1, length_penalty=1.0)
    result = translator.translate_batch(batch, **kwargs)  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = translator.translate_batch(batch, **kwargs)
        times.append((time.perf_counter() - start) * 1e3)
    index = {t: i for i, t in enumerate(vocab)}
    return [index[t] for t in result[0].hypotheses[0]], statistics.median(times)


def tessel_run(binary, model, src_ids, steps, beam, runs, threads):
    cmd = [binary, model, "--src", ",".join(map(str, src_ids)), "--steps", str(steps),
           "--beam", str(beam), "--runs", str(runs)]
    cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and threads > 1 and "runs one thread" in proc.stderr:
        return None, None, None  # a tessel build without the thread pool
    proc.check_returncode()
    r = json.loads(proc.stdout)
    return r["tokens"], r["median_ms"], r["isa"]


def main():
    binary = sys.argv[1]
    runs = int(os.environ.get("PEER_RUNS", "5"))
    f32 = ensure_model("transformer-base-f32", "float32")
    int8 = ensure_model("transformer-base-int8", "int8")
    print("date %s UTC, ctranslate2 %s, %s, %d runs per cell (median)" % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), ctranslate2.__version__,
        platform.processor() or platform.machine(), runs))
    rows, mismatches = [], 0
    for name, src_len, steps, beam in SCENARIOS:
        src = source(src_len)
        t_tokens, t_ms, isa = tessel_run(binary, f32, src, steps, beam, runs, 1)
        t2_tokens, t2_ms, _ = tessel_run(binary, f32, src, steps, beam, runs, 2)
        if t2_tokens is not None and t2_tokens != t_tokens:
            mismatches += 1
        cells = {}
        for threads in (1, 2):
            c_tokens, c_ms = ct2_run(f32, "float32", threads, src, steps, beam, runs)
            same = c_tokens == t_tokens
            mismatches += not same
            cells[threads] = (c_ms, same)
        _, i8_ms = ct2_run(int8, "int8", 1, src, steps, beam, runs)
        distinct = len(set(t_tokens))
        rows.append((name, cells, t_ms, t2_ms, i8_ms, distinct, len(t_tokens)))
    print("tessel ISA %s" % isa)
    header = ("scenario", "ct2 f32 1t ms", "tessel 1t ms", "ratio 1t", "ct2 f32 2t ms",
              "tessel 2t ms", "ratio 2t", "ct2 int8 1t ms", "tokens", "same tokens")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, cells, t_ms, t2_ms, i8_ms, distinct, n in rows:
        two = ("%.1f | %.2f" % (t2_ms, t2_ms / cells[2][0]) if t2_ms is not None
               else "n/a (1-thread build) | %.2f (tessel 1t)" % (t_ms / cells[2][0]))
        print("| %s | %.1f | %.1f | %.2f | %.1f | %s | %.1f | %d (%d distinct) | %s |" % (
            name, cells[1][0], t_ms, t_ms / cells[1][0], cells[2][0], two, i8_ms, n,
            distinct, "yes" if cells[1][1] and cells[2][1] else "NO"))
    print("ratio = tessel time / CTranslate2 float32 time (below 1: tessel is faster)")
    if mismatches:
        print("TOKEN MISMATCH in %d comparisons" % mismatches)
        sys.exit(1)


if __name__ == "__main__":
    main()
