#!/usr/bin/env python3
"""Adds CTranslate2's int8 Whisper to each fixture of tests/whisper/ (made by make_whisper_golden.py).

For each fixture it writes tests/whisper/<name>/ct2_int8/:

  model.bin, config.json, vocabulary.json, tokenizer.json, preprocessor_config.json
             the fixture's hf/ converted by ctranslate2.converters.TransformersConverter with
             quantization="int8": every linear weight and the token embedding table (tied to the
             output projection) as int8 with one float32 `weight_scale` per row; the two conv
             weights int8 too (CTranslate2's CPU build dequantises those at load and runs the
             convolutions in float32); norms, biases and positions float32
  expected.safetensors
             `tokens` (I64: the fixture's prompt, then CTranslate2's greedy tokens) and `logits`
             (F32 [steps, vocab]: the raw logits CTranslate2 computed for each generated token,
             `return_logits_vocab=True`), from `ctranslate2.models.Whisper(dir,
             compute_type="int8", intra_threads=1).generate` on the fixture's `mel` with
             beam_size 1, suppress_blank False, suppress_tokens [] (so no rule edits a logit)

CTranslate2 int8 quantises each activation row to round(x * 127 / max|x|) (ties to even) and
sums the int8 products exactly in int32, then scales the sums back to float32.
tests/tests/suite/whisper_int8.rs checks that tessel computes the same on these files.

Usage (ctranslate2, transformers (for the converter), safetensors, numpy):
    python3 tools/make_whisper_int8_golden.py            # every fixture
    python3 tools/make_whisper_int8_golden.py tiny_like_80
Checked with ctranslate2 4.8.5. Rerunning on the same CPU rewrites every file byte for byte.
"""

import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "whisper")
FIXTURES = ["tiny_like_80", "odd_128"]
# New tokens asked for; CTranslate2 generates max_length / 2 tokens after the prompt (see
# make_whisper_golden.py), so it is asked for twice this.
NEW_TOKENS = 10


def convert(name):
    from ctranslate2.converters import TransformersConverter

    out = os.path.join(ROOT, name, "ct2_int8")
    converter = TransformersConverter(
        os.path.join(ROOT, name, "hf"),
        copy_files=["tokenizer.json", "preprocessor_config.json"],
    )
    converter.convert(out, quantization="int8", force=True)
    return out


def greedy_with_logits(model_dir, mel, prompt):
    import ctranslate2

    model = ctranslate2.models.Whisper(
        model_dir, device="cpu", compute_type="int8", intra_threads=1
    )
    features = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None]))
    result = model.generate(
        features, [prompt], beam_size=1, max_length=2 * NEW_TOKENS, suppress_blank=False,
        suppress_tokens=[], return_logits_vocab=True,
    )[0]
    tokens = [int(t) for t in result.sequences_ids[0]]
    logits = np.stack([np.asarray(row, dtype=np.float32).reshape(-1) for row in result.logits[0]])
    assert len(tokens) == NEW_TOKENS == len(logits), (tokens, logits.shape)
    return tokens, logits


def main(names):
    for name in names:
        expected = load_file(os.path.join(ROOT, name, "expected.safetensors"))
        mel = expected["mel"].astype(np.float32)
        prompt = [int(t) for t in expected["prompt"]]
        out = convert(name)
        tokens, logits = greedy_with_logits(out, mel, prompt)
        save_file(
            {"tokens": np.array(prompt + tokens, dtype=np.int64), "logits": logits},
            os.path.join(out, "expected.safetensors"),
        )
        print(f"{name}: CTranslate2 int8 greedy {tokens}")


if __name__ == "__main__":
    main(sys.argv[1:] or FIXTURES)
