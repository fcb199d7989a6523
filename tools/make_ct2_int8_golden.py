"""Writes tests/ct2_int8/: a small CTranslate2 int8 Transformer and what CTranslate2 computes on it.

Usage: python3 tools/make_ct2_int8_golden.py  (from the repository root; needs ctranslate2, numpy)

The model is built by bench/peers/make_model.py (CTranslate2's own spec API, then
`spec.optimize(quantization=...)`, the quantiser `ct2-transformers-converter --quantization`
runs): pre-norm GELU, 2+2 layers, d_model 64, 4 heads, d_ff 128, 40 tokens, gain 1.0.

- `int8/`: quantization `int8`: linear weights and embedding tables int8 with a per-row
  `weight_scale`, norms and biases float32.
- `int8_float16/`: quantization `int8_float16` of the same weights: the same int8 variables,
  norms, biases and positions float16.

Each directory holds `expected_int8.txt` (CTranslate2 run with compute_type `int8`: its own int8
GEMMs, activations quantised per row) and `expected_f32.txt` (compute_type `float32`: the int8
weights dequantised). Format, as tests/ct2/*/expected.txt: the source ids, CTranslate2's greedy
tokens (EOS never chosen: its output bias is -1e4), then the raw logits of every step.
"""

import json
import os
import subprocess
import sys

import numpy as np
import ctranslate2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "ct2_int8")
MODEL = ["--layers", "2", "--d-model", "64", "--heads", "4", "--d-ff", "128", "--vocab", "40",
         "--pre-norm", "--activation", "gelu", "--gain", "1.0", "--seed", "19"]
SOURCE = [5, 17, 3, 29, 11, 38, 7, 21, 9]
STEPS = 10


def run(model_dir, compute_type):
    vocab = json.load(open(os.path.join(model_dir, "shared_vocabulary.json")))
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type,
                                        intra_threads=1)
    r = translator.translate_batch(
        [[vocab[i] for i in SOURCE]], beam_size=1, max_decoding_length=STEPS,
        min_decoding_length=STEPS, return_logits_vocab=True)[0]
    tokens = [vocab.index(t) for t in r.hypotheses[0]]
    logits = [np.array(l).reshape(-1).tolist() for l in r.logits[0]]
    return tokens, logits


def main():
    for quantization in ["int8", "int8_float16"]:
        out = os.path.join(OUT, quantization)
        if os.path.isdir(out):
            for f in os.listdir(out):
                os.remove(os.path.join(out, f))
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "peers", "make_model.py"),
                        out] + MODEL + ["--quantization", quantization], check=True)
        for compute_type, name in [("int8", "expected_int8.txt"), ("float32", "expected_f32.txt")]:
            tokens, logits = run(out, compute_type)
            with open(os.path.join(out, name), "w") as f:
                f.write(" ".join(map(str, SOURCE)) + "\n")
                f.write(" ".join(map(str, tokens)) + "\n")
                for row in logits:
                    f.write(" ".join("%.9g" % x for x in row) + "\n")
            print(quantization, compute_type, tokens)


if __name__ == "__main__":
    main()
