"""Side-by-side comparison of tessel and CTranslate2 on the same CTranslate2 model directory.

Run through bench/peers/run.sh, which prepares the virtual environment and the tessel binary.
`PEER_MODELS` (comma-separated, default `transformer-base`) picks the tables:

- `transformer-base`: a random-weight Transformer-base (6+6 layers, d_model 512, 8 heads, d_ff
  2048, vocab 32000) built with CTranslate2's spec API (make_model.py; float32, plus an int8 copy
  of the same weights); every scenario runs through CTranslate2 (compute_type float32 and int8
  at 1 and 2 intra_threads) and through tessel (bench/src/bin/ct2_peer.rs, 1 and 2 threads; f32
  on the float32 directory, int8 on the int8 one: the same int8 weights CTranslate2 runs),
  interleaving the engines run by run; prints a table of median times (encode + search, batch 1).
- `marian-base`, `nllb-600m`: random-weight models of the OPUS-MT and NLLB-200-distilled-600M
  shapes built with transformers' own config classes and converted by CTranslate2's
  transformers converter (make_hf_model.py, run with `PEER_HF_PYTHON`, default `python3`, which
  needs torch and transformers); source 32 -> 32 tokens, greedy and beam 4, 1 and 2 threads,
  float32. tessel runs as one `ct2_peer --serve` process per model (loaded once), each of its
  runs interleaved with CTranslate2's; the table adds each engine's time per decode step and
  tessel's step against merely reading the step's weight bytes once (measured by ct2_peer in the
  same run).

Every run of both engines must emit identical tokens. EOS cannot end a search on either side
(make_model.py sets its output bias to -1e4, make_hf_model.py its output row to zero),
CTranslate2 gets min_decoding_length = max_decoding_length = steps and tessel
stop_at_eos = false, so every run decodes exactly `steps` tokens.
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


def source(n, first=3, end=VOCAB):
    """`n` spread-out token ids in [first, end)."""
    return [first + (i * 7919 + 104729) % (end - first) for i in range(n)]


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


def transformer_base(binary, runs):
    """The Transformer-base tables (f32, int8 and bf16 against CTranslate2 f32 and int8)."""
    f32 = ensure_model("transformer-base-f32", "float32")
    int8 = ensure_model("transformer-base-int8", "int8")
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


# The published shapes of make_hf_model.py: vocabulary size (for the source ids).
HF_SHAPES = {"marian-base": 58101, "nllb-600m": 256206}
HF_STEPS, HF_SRC_LEN = 32, 32
HF_SEARCHES = [("greedy", 1), ("beam 4", 4)]


def ensure_hf_model(shape):
    """The CTranslate2 directory of `shape`, built (with its HF directory) when missing."""
    out = os.path.join(MODELS, shape)
    ct2_dir = os.path.join(out, "ct2")
    if not os.path.isfile(os.path.join(ct2_dir, "model.bin")):
        python = os.environ.get("PEER_HF_PYTHON", "python3")
        subprocess.run([python, os.path.join(HERE, "make_hf_model.py"), shape, out], check=True)
    return ct2_dir


class TesselServer:
    """One `ct2_peer --serve` process: the model loaded once, one JSON answer per request."""

    def __init__(self, binary, model, src, steps, max_beam):
        cmd = [binary, model, "--src", ",".join(map(str, src)), "--steps", str(steps),
               "--beam", str(max_beam), "--serve"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def run(self, beam, threads, stream_read=False):
        """ct2_peer's JSON answer for one run of `beam` at `threads` (see ct2_peer.rs)."""
        line = "--beam %d --threads %d --runs 1%s\n" % (
            beam, threads, " --stream-read" if stream_read else "")
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            sys.exit("ct2_peer --serve stopped (exit status %s)" % self.proc.wait())
        return json.loads(answer)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def hf_shape(binary, shape, runs):
    """The table of one make_hf_model.py shape: times, time per step, stream-read floor."""
    model = ensure_hf_model(shape)
    src = source(HF_SRC_LEN, 4, HF_SHAPES[shape] - 8)
    tessel = TesselServer(binary, model, src, HF_STEPS, max(b for _, b in HF_SEARCHES))
    cells, stream, step_bytes, mismatches, isa = [], [], 0, 0, "?"
    reference = {}  # search name -> CTranslate2's tokens of the first run
    # One CTranslate2 translator at a time (NLLB-600M float32 takes 4 GB); tessel's one process
    # keeps a session per (beam, threads).
    for threads in (1, 2):
        ct2 = Ct2(model, "float32", threads)
        times = {(name, engine): ([], []) for name, _ in HF_SEARCHES
                 for engine in ("ct2", "tessel")}
        for name, beam in HF_SEARCHES:
            ct2.run(src, HF_STEPS, beam)  # warm-up; ct2_peer warms up a new session itself
            ct2.run(src, 1, beam)
        for _ in range(runs):
            for name, beam in HF_SEARCHES:
                tokens, ms = ct2.run(src, HF_STEPS, beam)
                _, one_ms = ct2.run(src, 1, beam)
                reference.setdefault(name, tokens)
                mismatches += tokens != reference[name]
                times[name, "ct2"][0].append(ms)
                times[name, "ct2"][1].append(one_ms)
                r = tessel.run(beam, threads, stream_read=threads == 1 and beam == 1)
                isa, step_bytes = r["isa"], r["step_bytes"]
                mismatches += r["tokens"] != reference[name]
                times[name, "tessel"][0].append(r["median_ms"])
                times[name, "tessel"][1].append(r["one_step_ms"])
                if "stream_ms" in r:
                    stream.append(r["stream_ms"])
        del ct2
        for name, _ in HF_SEARCHES:
            med = {engine: tuple(statistics.median(v) for v in times[name, engine])
                   for engine in ("ct2", "tessel")}
            tokens = reference[name]
            cells.append((name, threads, med, len(tokens), len(set(tokens))))
    tessel.close()
    stream_ms = statistics.median(stream)
    print("%s (%s), tessel ISA %s, one decode step reads %.0f MB of weights, stream-read of "
          "those bytes (1 thread) %.2f ms" % (shape, model, isa, step_bytes / 1e6, stream_ms))
    header = ("search", "threads", "ct2 ms", "tessel ms", "ratio", "ct2 ms/step",
              "tessel ms/step", "tessel step / stream-read", "tokens")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, threads, med, n, distinct in cells:
        step = {engine: (full - one) / (HF_STEPS - 1) for engine, (full, one) in med.items()}
        print("| %s | %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %d (%d distinct) |" % (
            name, threads, med["ct2"][0], med["tessel"][0], med["tessel"][0] / med["ct2"][0],
            step["ct2"], step["tessel"], step["tessel"] / stream_ms, n, distinct))
    print("ratio = tessel time / CTranslate2 float32 time (encode + %d steps, medians); ms/step "
          "= (time of %d steps - time of 1 step) / %d for each engine; tessel step / "
          "stream-read: 1 = the step takes as long as reading its weights once"
          % (HF_STEPS, HF_STEPS, HF_STEPS - 1))
    if mismatches:
        print("TOKEN MISMATCH in %d comparisons" % mismatches)
        sys.exit(1)
    print("tokens: tessel (every run) == CTranslate2 float32 (every run), every cell")


def main():
    binary = sys.argv[1]
    runs = int(os.environ.get("PEER_RUNS", "5"))
    shapes = os.environ.get("PEER_MODELS", "transformer-base").split(",")
    for shape in shapes:
        if shape != "transformer-base" and shape not in HF_SHAPES:
            sys.exit("PEER_MODELS: unknown `%s` (transformer-base, %s)"
                     % (shape, ", ".join(HF_SHAPES)))
    print("date %s UTC, ctranslate2 %s, %s, %d runs per cell (median), load average %s" % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), ctranslate2.__version__,
        platform.processor() or platform.machine(), runs,
        " ".join("%.2f" % x for x in os.getloadavg())))
    for shape in shapes:
        if shape == "transformer-base":
            transformer_base(binary, runs)
        else:
            hf_shape(binary, shape, runs)
        print("load average after %s: %s" % (
            shape, " ".join("%.2f" % x for x in os.getloadavg())))
        print()


if __name__ == "__main__":
    main()
