"""Writes the tiny CTranslate2 fixtures of tests/ct2/ and what CTranslate2 itself computes on them.

Usage: make_fixture.py TESTS_CT2_DIR  (run by bench/peers/run.sh --fixtures)

Each fixture directory holds a model built by make_model.py and `expected.txt`: the source ids (line 1),
CTranslate2's greedy tokens (line 2; compute_type float32, EOS never chosen, see make_model.py)
and the raw logits of every decoding step (one line each).
"""

import json
import os
import subprocess
import sys

import numpy as np
import ctranslate2

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL = ["--layers", "2", "--d-model", "16", "--heads", "2", "--d-ff", "32", "--vocab", "40"]
FIXTURES = {
    "post_relu_sinusoidal_f32": SMALL + ["--seed", "1"],
    "pre_gelu_shared_learned_f16": SMALL
    + ["--seed", "2", "--pre-norm", "--shared", "--learned-positions", "24",
       "--activation", "gelu", "--quantization", "float16"],
    "post_relu_int8": SMALL + ["--seed", "3", "--quantization", "int8"],
    "post_swish_f32": SMALL + ["--seed", "4", "--activation", "swish"],
}
STEPS = 10


def main():
    root = sys.argv[1]
    for name, args in FIXTURES.items():
        out = os.path.join(root, name)
        if os.path.isdir(out):
            for f in os.listdir(out):
                os.remove(os.path.join(out, f))
        subprocess.run([sys.executable, os.path.join(HERE, "make_model.py"), out] + args,
                       check=True)
        vocab = json.load(open(os.path.join(out, "shared_vocabulary.json")))
        src_ids = [5, 17, 3, 29, 11, 38, 7]
        translator = ctranslate2.Translator(out, device="cpu", compute_type="float32",
                                            intra_threads=1)
        r = translator.translate_batch(
            [[vocab[i] for i in src_ids]], beam_size=1, max_decoding_length=STEPS,
            min_decoding_length=STEPS, return_logits_vocab=True)[0]
        tokens = [vocab.index(t) for t in r.hypotheses[0]]
        logits = [np.array(l).reshape(-1).tolist() for l in r.logits[0]]
        with open(os.path.join(out, "expected.txt"), "w") as f:
            f.write(" ".join(map(str, src_ids)) + "\n")
            f.write(" ".join(map(str, tokens)) + "\n")
            for row in logits:
                f.write(" ".join("%.9g" % x for x in row) + "\n")
        print(name, tokens)


if __name__ == "__main__":
    main()
