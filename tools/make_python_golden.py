#!/usr/bin/env python3
"""Builds python/tests/fixtures/scoring.json: CTranslate2's `Translator.score_batch` on the
committed CTranslate2 conversions of tests/translation/<family>/ct2, for the cases below
(cut sources and targets, an offset, an empty source, no cut). tessel's `score_batch` is held
to these in python/tests/test_translator.py, so CI needs no ctranslate2.

Usage (ctranslate2): python3 tools/make_scoring_golden.py
"""

import json
from pathlib import Path

import ctranslate2

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["marian", "mbart", "m2m100", "t5_v1_1"]
CASES = [{}, {"offset": 1}, {"max_input_length": 4}, {"max_input_length": 0, "offset": 20}]


def examples(tokens):
    """Three sources and their targets, as token strings: short, long, and an empty source."""
    sources = [tokens[5:8], [tokens[9]] * 7, []]
    targets = [tokens[8:10], tokens[8:20], tokens[4:5]]
    return sources, targets


def main():
    out = {}
    for name in FAMILIES:
        ct2_dir = ROOT / "tests" / "translation" / name / "ct2"
        tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
        sources, targets = examples(tokens)
        translator = ctranslate2.Translator(str(ct2_dir), compute_type="float32")
        runs = []
        for case in CASES:
            results = translator.score_batch(sources, targets, **case)
            runs.append(
                {
                    "options": case,
                    "results": [{"tokens": r.tokens, "log_probs": r.log_probs} for r in results],
                }
            )
        out[name] = {"sources": sources, "targets": targets, "runs": runs}
    path = ROOT / "python" / "tests" / "fixtures" / "scoring.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
