"""Batched decoding of a file: tessel's `Batch` against CTranslate2's `translate_batch`.

Run through bench/peers/run.sh with `PEER_FILE=1` (or directly: `python3 run_file.py
path/to/ct2_peer`). For each shape of `PEER_MODELS` (default `marian-base`; make_hf_model.py's
shapes) it decodes a file of `PEER_LINES` (64) source lines of 8 to 40 ids (fixed seed), exactly
32 tokens each (EOS cannot end a line on either side), greedy and beam 4, at 1 and 2 threads,
on the float32 CTranslate2 directory and on its int8 conversion by CTranslate2 (tessel loading
the same int8 variables, `--weights int8`):

- CTranslate2: `translate_batch(lines, max_batch_size=M)` for every M of `PEER_CT2_BATCHES`
  (8,16,32,64) in the first round, then for the fastest of them only, `compute_type` float32
  or int8, `intra_threads` 1 or 2;
- tessel: one `ct2_peer --lines FILE --serve` process per directory, decoding the file
  `--batch B` lines together (longest first) for every B of `PEER_BATCHES` (1,4,16,64).

Every cell is the median of `PEER_RUNS` (3) runs of the whole file after a warm-up, the engines
and cells interleaved run by run. Tokens are compared line by line with tessel at batch 1:
tessel's batches must give identical tokens, CTranslate2 float32 must too; int8 agreement is
reported. `PEER_WEIGHTS`, `PEER_THREADS` and `PEER_SEARCHES` (greedy,beam4) narrow the cells.
"""

import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import time

import ctranslate2

import run

STEPS = 32
SEARCHES = {"greedy": 1, "beam4": 4}


def env_list(name, default, kind=str):
    return [kind(v) for v in os.environ.get(name, default).split(",") if v]


def cpu_name():
    """lscpu's model name and the AVX2 / AVX-512 flags it lists."""
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    wide = [f for f in flags if f == "avx2" or f.startswith("avx512")]
    return "%s, %d CPUs, flags %s" % (fields.get("Model name", "?").strip(),
                                      os.cpu_count(), " ".join(wide) or "no avx2")


def load():
    return os.getloadavg()[0]


def ensure_int8(shape, f32_dir):
    """CTranslate2's int8 conversion of the shape's HF directory (next to its ct2/)."""
    out = os.path.join(os.path.dirname(f32_dir), "ct2-int8")
    if not os.path.isfile(os.path.join(out, "model.bin")):
        python = os.environ.get("PEER_HF_PYTHON", "python3")
        code = ("import sys, ctranslate2; ctranslate2.converters.TransformersConverter("
                "sys.argv[1]).convert(sys.argv[2], quantization='int8', force=True)")
        hf_dir = os.path.join(os.path.dirname(f32_dir), "hf")
        subprocess.run([python, "-c", code, hf_dir, out], check=True)
    return out


def write_lines(shape, count, seed=11):
    """`count` source lines of 8 to 40 ids in [4, vocabulary - 8), comma-separated."""
    rng = random.Random(seed)
    vocab = run.HF_SHAPES[shape]
    lines = [[rng.randrange(4, vocab - 8) for _ in range(rng.randint(8, 40))]
             for _ in range(count)]
    path = os.path.join(run.MODELS, shape, "lines-%d.txt" % count)
    with open(path, "w") as f:
        f.writelines(",".join(map(str, line)) + "\n" for line in lines)
    return path, lines


class Ct2File:
    """One CTranslate2 translator decoding the whole file per run."""

    def __init__(self, model, compute_type, threads, lines):
        vocab = json.load(open(os.path.join(model, "shared_vocabulary.json")))
        self.index = {t: i for i, t in enumerate(vocab)}
        self.batch = [[vocab[i] for i in line] for line in lines]
        self.translator = ctranslate2.Translator(
            model, device="cpu", compute_type=compute_type, intra_threads=threads,
            inter_threads=1)

    def run(self, max_batch, beam, count=None):
        """Every line's tokens and the milliseconds of the whole file."""
        start = time.perf_counter()
        results = self.translator.translate_batch(
            self.batch[:count], max_batch_size=max_batch, beam_size=beam,
            max_decoding_length=STEPS, min_decoding_length=STEPS, num_hypotheses=1,
            length_penalty=1.0)
        ms = (time.perf_counter() - start) * 1e3
        return [[self.index[t] for t in r.hypotheses[0]] for r in results], ms


class TesselFile:
    """One `ct2_peer --lines FILE --serve` process (see ct2_peer.rs)."""

    def __init__(self, binary, model, lines_path, weights):
        cmd = [binary, model, "--lines", lines_path, "--steps", str(STEPS), "--beam",
               str(max(SEARCHES.values())), "--weights", weights, "--serve"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def run(self, batch, beam, threads):
        self.proc.stdin.write("--batch %d --beam %d --threads %d --runs 1\n"
                              % (batch, beam, threads))
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            sys.exit("ct2_peer --serve stopped (exit status %s)" % self.proc.wait())
        return json.loads(answer)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def measure(binary, model, weights, lines_path, lines, config):
    """Every cell's times, encode times, tokens and load averages for one directory."""
    threads_list, searches, batches, ct2_batches, runs = config
    tessel = TesselFile(binary, model, lines_path, weights)
    cells = {}  # (threads, search, engine, batch) -> {"ms": [], "encode": [], "tokens", "load": []}
    for threads in threads_list:
        ct2 = Ct2File(model, "int8" if weights == "int8" else "float32", threads, lines)
        for search in searches:
            ct2.run(8, SEARCHES[search], count=8)  # warm-up; ct2_peer warms up each batch
        best = {}  # search -> CTranslate2's fastest M of the first round, the one timed again
        for run_index in range(runs):
            for search in searches:
                beam = SEARCHES[search]
                for m in ct2_batches if run_index == 0 else [best[search]]:
                    cell = cells.setdefault((threads, search, "ct2", m), {"ms": [], "load": []})
                    cell["load"].append(load())
                    cell["tokens"], ms = ct2.run(m, beam)
                    cell["ms"].append(ms)
                best.setdefault(search, min(ct2_batches, key=lambda m: cells[
                    threads, search, "ct2", m]["ms"][0]))
                for b in batches:
                    cell = cells.setdefault((threads, search, "tessel", b),
                                            {"ms": [], "encode": [], "load": []})
                    cell["load"].append(load())
                    r = tessel.run(b, beam, threads)
                    cell["tokens"], cell["isa"] = r["tokens"], r["isa"]
                    cell["ms"].append(r["median_ms"])
                    cell["encode"].append(r["encode_ms"])
        del ct2
    tessel.close()
    return cells


def same_lines(a, b):
    return sum(x == y for x, y in zip(a, b))


def table(shape, weights, cells, config, n_lines):
    """Prints the table of one directory; the number of required token comparisons failed."""
    threads_list, searches, batches, ct2_batches, _ = config
    tokens = n_lines * STEPS
    failures = 0
    header = ("search", "threads", "engine", "batch", "ms (median)", "spread ms", "tokens/s",
              "encode ms", "vs tessel b1", "vs ct2 best", "lines = tessel b1", "load")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for threads in threads_list:
        for search in searches:
            med = {k[2:]: statistics.median(c["ms"]) for k, c in cells.items()
                   if k[:2] == (threads, search)}
            best_m = max(ct2_batches, key=lambda m: (len(cells[threads, search, "ct2", m]["ms"]),
                                                     -med["ct2", m]))
            base = cells[threads, search, "tessel", batches[0]]
            rows = [("ct2", best_m)] + [("tessel", b) for b in batches]
            for engine, b in rows:
                c = cells[threads, search, engine, b]
                same = same_lines(c["tokens"], base["tokens"])
                required = engine == "tessel" or weights == "f32"
                failures += required and same != n_lines
                label = "%d (best of %s)" % (b, "/".join(map(str, ct2_batches))) \
                    if engine == "ct2" else str(b)
                enc = "%.0f" % statistics.median(c["encode"]) if "encode" in c else "-"
                print("| %s | %d | %s | %s | %.0f | %.0f-%.0f | %.0f | %s | %.2f | %.2f | "
                      "%d/%d | %.1f-%.1f |" % (
                          search, threads, engine, label, med[engine, b], min(c["ms"]),
                          max(c["ms"]), tokens / med[engine, b] * 1e3, enc,
                          med["tessel", batches[0]] / med[engine, b],
                          med["ct2", best_m] / med[engine, b], same, n_lines,
                          min(c["load"]), max(c["load"])))
            print("| %s | %d | ct2 other M (1 run) | %s | | | | | | | | |" % (
                search, threads, ", ".join(
                    "%d: %.0f ms, lines %d/%d" % (
                        m, med["ct2", m], same_lines(cells[threads, search, "ct2", m]["tokens"],
                                                     base["tokens"]), n_lines)
                    for m in ct2_batches if m != best_m)))
    return failures


def main():
    binary = sys.argv[1]
    runs = int(os.environ.get("PEER_RUNS", "3"))
    n_lines = int(os.environ.get("PEER_LINES", "64"))
    config = (env_list("PEER_THREADS", "1,2", int), env_list("PEER_SEARCHES", "greedy,beam4"),
              env_list("PEER_BATCHES", "1,4,16,64", int),
              env_list("PEER_CT2_BATCHES", "8,16,32,64", int), runs)
    print("date %s UTC, ctranslate2 %s, %s, %d runs per cell (median), load average %s" % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), ctranslate2.__version__,
        cpu_name(), runs, " ".join("%.2f" % x for x in os.getloadavg())))
    failures = 0
    for shape in env_list("PEER_MODELS", "marian-base"):
        f32_dir = run.ensure_hf_model(shape)
        dirs = {"f32": f32_dir}
        if "int8" in env_list("PEER_WEIGHTS", "f32,int8"):
            dirs["int8"] = ensure_int8(shape, f32_dir)
        dirs = {w: d for w, d in dirs.items() if w in env_list("PEER_WEIGHTS", "f32,int8")}
        lines_path, lines = write_lines(shape, n_lines)
        lengths = [len(line) for line in lines]
        for weights, model in dirs.items():
            cells = measure(binary, model, weights, lines_path, lines, config)
            isa = next(c["isa"] for c in cells.values() if "isa" in c)
            print()
            print("%s %s (%s), tessel ISA %s, %d lines of %d-%d source ids (%d in all), %d "
                  "tokens each (%d in all)" % (shape, weights, model, isa, n_lines,
                                               min(lengths), max(lengths), sum(lengths), STEPS,
                                               n_lines * STEPS))
            failures += table(shape, weights, cells, config, n_lines)
            print("load average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    print()
    print("ms = the whole file (encode + %d steps per line); tokens/s = generated tokens "
          "(lines x %d) per second; vs tessel b1 / vs ct2 best = that time / this time (above "
          "1: this cell is faster); lines = tessel b1: lines whose tokens equal tessel batch "
          "1's; load = 1-minute load average at the cell's runs" % (STEPS, STEPS))
    if failures:
        print("TOKEN MISMATCH in %d required comparisons (tessel batches, CTranslate2 float32)"
              % failures)
        sys.exit(1)
    print("tokens: tessel at every batch size == tessel batch 1%s" % (
        "; CTranslate2 float32 == tessel float32" if "f32" in env_list("PEER_WEIGHTS", "f32,int8")
        else ""))


if __name__ == "__main__":
    main()
