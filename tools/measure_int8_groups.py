"""Measures whether per-group int8 weight scales (32 or 64 inputs per scale) improve accuracy
over tessel's per-channel scales enough to pay for them (issue 19's decision).

Usage: python3 tools/measure_int8_groups.py  (from the repository root; torch, transformers,
numpy, safetensors; prints a table, writes nothing)

Weight-only simulation in float64: every linear weight of a model (the projections, the
feed-forward layers and the output projection; embeddings and norms stay float, as in tessel) is
replaced by its symmetric int8 round trip `round(w · 127 / amax) · amax / 127`, with `amax` per
output channel or per group of 32 / 64 consecutive inputs of a channel. The per-row activation
quantisation that tessel adds is the same for every weight layout, so it does not enter the
comparison. Reported: the worst teacher-forced logit change relative to the float model's logit
scale, and its RMS, on
- the numbers model (`assets/numbers`, trained: the only trained weights in the repository),
  teacher-forced on 400 held-out lines;
- the random-weight translation fixtures (`tests/translation/*/hf`) on their forced tokens.
"""

import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
torch.set_default_dtype(torch.float64)


def round_trip(w, group):
    """Symmetric int8 round trip of a [out, in] weight with one scale per channel (group 0) or
    per `group` consecutive inputs."""
    out, inp = w.shape
    if group == 0 or group >= inp:
        g = w.reshape(out, 1, inp)
    else:
        pad = (-inp) % group
        g = torch.nn.functional.pad(w, (0, pad)).reshape(out, -1, group)
    amax = g.abs().amax(dim=2, keepdim=True).clamp_min(1e-30)
    q = torch.round(g * 127.0 / amax).clamp(-127, 127) * amax / 127.0
    return q.reshape(out, -1)[:, :inp]


def linear_weights(model):
    """Every 2-D linear weight: nn.Linear weights and nn.MultiheadAttention's in_proj_weight."""
    for name, p in model.named_parameters():
        if p.dim() == 2 and ("embed" not in name and "shared" not in name
                             and not name.endswith("embed_tokens.weight")
                             and "embed_positions" not in name and "relative_attention" not in name):
            yield name, p


def drift(model, forward, group):
    """Worst and RMS change of the logits relative to the float scale, with weights replaced."""
    with torch.no_grad():
        base = forward(model)
        saved = {n: p.detach().clone() for n, p in linear_weights(model)}
        for n, p in linear_weights(model):
            p.copy_(round_trip(p, group))
        got = forward(model)
        for n, p in linear_weights(model):
            p.copy_(saved[n])
    scale = max(base.abs().max().item(), 1.0)
    d = (got - base).abs()
    return d.max().item() / scale, d.pow(2).mean().sqrt().item() / scale


def numbers_case():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import train_numbers as tn
    import json
    arch = json.load(open(os.path.join(ROOT, "assets", "numbers", "config.json")))
    model = tn.Seq2Seq(arch).double()
    tn.load_weights(model, os.path.join(ROOT, "assets", "numbers", "model.safetensors"))
    model.eval()
    lines = open(os.path.join(ROOT, "assets", "numbers", "heldout.tsv")).read().splitlines()
    pairs = []
    for line in lines[:400]:
        words, digits = line.split("\t")[:2]
        pairs.append((words, int(digits)))
    src, tgt_in, _ = tn.batch(pairs)
    return "numbers (trained)", model, lambda m: m(src, tgt_in)


def translation_case(name):
    from safetensors.numpy import load_file
    import transformers
    hf = os.path.join(ROOT, "tests", "translation", name, "hf")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf, torch_dtype=torch.float64)
    model.eval()
    exp = load_file(os.path.join(ROOT, "tests", "translation", name, "expected.safetensors"))
    src = torch.tensor(exp["src_ids"].astype(np.int64)).reshape(1, -1)
    forced = torch.tensor(exp["decoder_input_ids"].astype(np.int64)).reshape(1, -1)
    return "%s (random)" % name, model, lambda m: m(input_ids=src, decoder_input_ids=forced).logits


def main():
    cases = [numbers_case()] + [translation_case(n) for n in ["marian", "bart", "t5"]]
    print("| model | per-channel worst / RMS | group 64 worst / RMS | group 32 worst / RMS |")
    print("|---|---|---|---|")
    for label, model, forward in cases:
        cells = []
        for group in (0, 64, 32):
            worst, rms = drift(model, forward, group)
            cells.append("%.2e / %.2e" % (worst, rms))
        print("| %s | %s |" % (label, " | ".join(cells)))


if __name__ == "__main__":
    main()
