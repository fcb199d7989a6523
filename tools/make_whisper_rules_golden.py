#!/usr/bin/env python3
"""Whisper decoding-rule fixtures: what CTranslate2's `Whisper.generate` produces with its
reference decoding rules on, for the committed random-weight models of tests/whisper/.

For each fixture directory (made by tools/make_whisper_golden.py) this loads `ct2/`, the
committed `mel`, and decodes with timestamps (the prompt without `<|notimestamps|>`),
`suppress_blank=True`, `suppress_tokens=[-1]` (the `suppress_ids` of ct2/config.json),
`max_initial_timestamp_index=50`, greedy and beam 5, and with the same rules but no timestamps
(the prompt ending in `<|notimestamps|>`). Writes `rules.safetensors` beside `expected.safetensors`:
`prompt_timestamps`, `greedy_timestamps`, `beam5_timestamps`, `prompt_plain`,
`beam5_plain` (I64 token ids, generated tokens only, EOT excluded as CTranslate2 returns them),
and `no_speech_prob` (F64, CTranslate2's no-speech probability of the greedy run).

Usage: python3 tools/make_whisper_rules_golden.py   (needs ctranslate2, numpy, safetensors)
"""

import json
import os

import ctranslate2
import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "whisper")


def generate(model, mel, prompt, beam):
    features = ctranslate2.StorageView.from_array(mel[None].astype(np.float32))
    result = model.generate(
        features,
        [prompt],
        beam_size=beam,
        max_length=24,
        return_no_speech_prob=True,
        suppress_blank=True,
        suppress_tokens=[-1],
        max_initial_timestamp_index=50,
    )[0]
    return result.sequences_ids[0], result.no_speech_prob


def main():
    for name in sorted(os.listdir(ROOT)):
        fixture = os.path.join(ROOT, name)
        if not os.path.isfile(os.path.join(fixture, "expected.safetensors")):
            continue
        expected = load_file(os.path.join(fixture, "expected.safetensors"))
        vocab = json.load(open(os.path.join(fixture, "ct2", "vocabulary.json")))
        no_timestamps = vocab.index("<|notimestamps|>")
        prompt = [int(t) for t in expected["prompt"]]
        timed = [t for t in prompt if t != no_timestamps]
        plain = timed + [no_timestamps]
        model = ctranslate2.models.Whisper(os.path.join(fixture, "ct2"), device="cpu")
        mel = expected["mel"]
        greedy, no_speech = generate(model, mel, timed, 1)
        beam5, _ = generate(model, mel, timed, 5)
        beam5_plain, _ = generate(model, mel, plain, 5)
        i64 = lambda xs: np.array(xs, dtype=np.int64)
        save_file(
            {
                "prompt_timestamps": i64(timed),
                "greedy_timestamps": i64(greedy),
                "beam5_timestamps": i64(beam5),
                "prompt_plain": i64(plain),
                "beam5_plain": i64(beam5_plain),
                "no_speech_prob": np.array([no_speech], dtype=np.float64),
            },
            os.path.join(fixture, "rules.safetensors"),
        )
        print(name, "greedy", greedy, "beam5", beam5, "plain", beam5_plain, "no_speech", no_speech)


if __name__ == "__main__":
    main()
