#!/usr/bin/env python3
"""Builds the references of python/tests/fixtures/ from CTranslate2's `Translator` on the
committed CTranslate2 conversions of tests/translation/<family>/ct2:

- scoring.json: `score_batch` for the SCORING cases (cut sources and targets, an offset, an
  empty source, no cut);
- generate_tokens.json: `generate_tokens`'s steps (step, id, token, log-probability, last)
  for the GENERATE cases (penalties, a minimum length, a target prefix).

tessel is held to these in python/tests/test_translator.py, so CI needs no ctranslate2.

Usage (ctranslate2): python3 tools/make_python_golden.py
"""

import json
from pathlib import Path

import ctranslate2

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["marian", "mbart", "m2m100", "t5_v1_1"]
SCORING = [{}, {"offset": 1}, {"max_input_length": 4}, {"max_input_length": 0, "offset": 20}]
GENERATE = [
    {"max_decoding_length": 5, "return_log_prob": True},
    {"max_decoding_length": 8, "min_decoding_length": 3, "repetition_penalty": 1.5,
     "no_repeat_ngram_size": 2, "return_log_prob": True},
    {"max_decoding_length": 5, "return_log_prob": True, "target_prefix": [9, 10]},
    {"max_decoding_length": 4},
]


def examples(tokens):
    """Three sources and their targets, as token strings: short, long, and an empty source."""
    sources = [tokens[5:8], [tokens[9]] * 7, []]
    targets = [tokens[8:10], tokens[8:20], tokens[4:5]]
    return sources, targets


def main():
    out, generated = {}, {}
    for name in FAMILIES:
        ct2_dir = ROOT / "tests" / "translation" / name / "ct2"
        tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
        sources, targets = examples(tokens)
        translator = ctranslate2.Translator(str(ct2_dir), compute_type="float32")
        runs = []
        for case in SCORING:
            results = translator.score_batch(sources, targets, **case)
            runs.append(
                {
                    "options": case,
                    "results": [{"tokens": r.tokens, "log_probs": r.log_probs} for r in results],
                }
            )
        out[name] = {"sources": sources, "targets": targets, "runs": runs}
        generated[name] = generate_runs(translator, tokens)
    write("scoring.json", out)
    write("generate_tokens.json", generated)


def generate_runs(translator, tokens):
    """generate_tokens's steps for each GENERATE case (a target prefix given as ids)."""
    source = tokens[5:8] + ["</s>"]
    runs = []
    for case in GENERATE:
        kw = dict(case)
        prefix = kw.pop("target_prefix", None)
        if prefix is not None:
            prefix = [tokens[i] for i in prefix]
        steps = translator.generate_tokens(source, prefix, **kw)
        runs.append(
            {
                "options": case,
                "steps": [[s.step, s.token_id, s.token, s.log_prob, s.is_last] for s in steps],
            }
        )
    return {"source": source, "runs": runs}


def write(name, data):
    path = ROOT / "python" / "tests" / "fixtures" / name
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
