"""Side-by-side comparison of tessel and CTranslate2 on the same CTranslate2 model directory.

Run through bench/peers/run.sh, which prepares the virtual environment and the tessel binary.
Builds a random-weight Transformer-base (6+6 layers, d_model 512, 8 heads, d_ff 2048, vocab 32000)
with CTranslate2's spec API (make_model.py; float32, plus an int8 copy of the same weights),
runs every scenario through CTranslate2 (compute_type float32 and int8 at 1 and 2 intra_threads)
and through tessel (bench/src/bin/ct2_peer.rs, 1 and 2 threads; f32 on the float32 directory,
int8 on the int8 one: the same int8 weights CTranslate2 runs),
interleaving the engines run by run, checks that every run of both emits identical tokens, and
prints a table of median times (encode + search, batch 1).

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


class Ct2:
    """One loaded CTranslate2 translator."""

    def __init__(self, model, compute_type, threads):
        self.vocab = json.load(open(os.path.join(model, "shared_vocabulary.json")))
        self.index = {t: i for i, t in enumerate(self.vocab)}
        self.translator = ctranslate2.Translator(
            model, device="cpu", compute_type=compute_type, intra_threads=threads,
            inter_threads=1)

    def run(self, src_ids, steps, beam):
        """Tokens and milliseconds of one encode + search."""
        batch = [[self.vocab[i] for i in src_ids]]
        start = time.perf_counter()
        result = self.translator.translate_batch(
            batch, beam_size=beam, max_decoding_length=steps, min_decoding_length=steps,
            num_hypotheses=1, length_penalty=1.0)
        ms = (time.perf_counter() - start) * 1e3
        return [self.index[t] for t in result[0].hypotheses[0]], ms


def tessel_run(binary, model, src_ids, steps, beam, threads, weights="f32"):
    """Tokens, milliseconds of one encode + search (after a warm-up) and the ISA level."""
    cmd = [binary, model, "--src", ",".join(map(str, src_ids)), "--steps", str(steps),
           "--beam", str(beam), "--runs", "1", "--threads", str(threads), "--weights", weights]
    proc = subprocess.run(cmd, capture_output=True, text=True)
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
    engines = {1: Ct2(f32, "float32", 1), 2: Ct2(f32, "float32", 2)}
    ct2_int8 = {1: Ct2(int8, "int8", 1), 2: Ct2(int8, "int8", 2)}
    rows, mismatches, isa = [], 0, "?"
    for name, src_len, steps, beam in SCENARIOS:
        src = source(src_len)
        for engine in list(engines.values()) + list(ct2_int8.values()):
            engine.run(src, steps, beam)  # warm-up
        times = {key: [] for key in ("ct2 1", "ct2 2", "tessel 1", "tessel 2", "int8 1",
                                     "int8 2", "tessel int8 1", "tessel int8 2", "bf16")}
        bf16_tokens = None
        int8_tokens = ct2_int8_tokens = None
        reference = None
        # Interleaved: every round measures every engine once, so load from other processes
        # on the machine falls on all of them alike.
        for _ in range(runs):
            for threads in (1, 2):
                tokens, ms = engines[threads].run(src, steps, beam)
                reference = reference or tokens
                mismatches += tokens != reference
                times["ct2 %d" % threads].append(ms)
                t_tokens, t_ms, t_isa = tessel_run(binary, f32, src, steps, beam, threads)
                if t_tokens is not None:
                    isa = t_isa
                    mismatches += t_tokens != reference
                    times["tessel %d" % threads].append(t_ms)
            for threads in (1, 2):
                ct2_int8_tokens, ms = ct2_int8[threads].run(src, steps, beam)
                times["int8 %d" % threads].append(ms)
                int8_tokens, ms, _ = tessel_run(binary, int8, src, steps, beam, threads, "int8")
                times["tessel int8 %d" % threads].append(ms)
            bf16_tokens, ms, _ = tessel_run(binary, f32, src, steps, beam, 1, "bf16")
            times["bf16"].append(ms)
        med = {k: statistics.median(v) if v else None for k, v in times.items()}
        spread = {k: (min(v), max(v)) if v else None for k, v in times.items()}
        same = sum(a == b for a, b in zip(bf16_tokens or [], reference))
        agree = (sum(a == b for a, b in zip(int8_tokens or [], reference)),
                 sum(a == b for a, b in zip(ct2_int8_tokens or [], reference)),
                 sum(a == b for a, b in zip(int8_tokens or [], ct2_int8_tokens or [])))
        rows.append((name, med, len(set(reference)), len(reference), same, agree, spread))
    print("tessel ISA %s" % isa)
    header = ("scenario", "ct2 f32 1t ms", "tessel 1t ms", "ratio 1t", "ct2 f32 2t ms",
              "tessel 2t ms", "ratio 2t", "ct2 int8 1t ms", "tessel bf16 1t ms", "tokens",
              "bf16 tokens = f32")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, m, distinct, n, same, _, _ in rows:
        two = ("%.1f | %.2f" % (m["tessel 2"], m["tessel 2"] / m["ct2 2"])
               if m["tessel 2"] is not None
               else "n/a (1-thread build) | %.2f (tessel 1t)" % (m["tessel 1"] / m["ct2 2"]))
        print("| %s | %.1f | %.1f | %.2f | %.1f | %s | %.1f | %.1f | %d (%d distinct) | %d/%d |" % (
            name, m["ct2 1"], m["tessel 1"], m["tessel 1"] / m["ct2 1"], m["ct2 2"], two,
            m["int8 1"], m["bf16"], n, distinct, same, n))
    print("ratio = tessel time / CTranslate2 float32 time (below 1: tessel is faster); "
          "tessel bf16 = the same model with its linear layers stored as bf16 (--weights bf16), "
          "beside CTranslate2's int8; its tokens are compared with the f32 ones, not required equal")
    print()
    header = ("scenario", "ct2 int8 1t ms", "tessel int8 1t ms", "ratio 1t", "ct2 int8 2t ms",
              "tessel int8 2t ms", "ratio 2t", "tessel int8 / tessel f32 1t",
              "tessel int8 = f32", "ct2 int8 = f32", "tessel int8 = ct2 int8")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, m, _, n, _, (t_f32, c_f32, t_c), _ in rows:
        print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %.2f | %d/%d | %d/%d | %d/%d |" % (
            name, m["int8 1"], m["tessel int8 1"], m["tessel int8 1"] / m["int8 1"], m["int8 2"],
            m["tessel int8 2"], m["tessel int8 2"] / m["int8 2"],
            m["tessel int8 1"] / m["tessel 1"], t_f32, n, c_f32, n, t_c, n))
    print("int8 ratio = tessel int8 time / CTranslate2 int8 time, both on the int8 directory "
          "(CTranslate2's quantisation); token agreement = positions equal to the float32 "
          "tokens (reported, not required)")
    print("spread (min-max ms over runs): " + "; ".join(
        "%s: %s" % (name, ", ".join("%s %.0f-%.0f" % (k, lo, hi)
                                     for k, (lo, hi) in spread.items() if spread[k]))
        for name, _, _, _, _, _, spread in rows))
    if mismatches:
        print("TOKEN MISMATCH in %d comparisons" % mismatches)
        sys.exit(1)
    tessel_threads = "1 and 2 threads" if rows[0][1]["tessel 2"] is not None else "1 thread"
    print("tokens: tessel (every run, %s) == CTranslate2 float32 (every run, 1 and 2 threads)"
          % tessel_threads)


if __name__ == "__main__":
    main()
