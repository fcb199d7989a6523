#!/usr/bin/env python3
"""Builds the golden fixtures of tessel-model from PyTorch's nn.Transformer.

For each configuration below it builds `nn.Transformer(batch_first=True)` in eval mode, with
source/target embeddings, positions and a generator defined exactly as tessel-model defines them
(embedding · √d + position, sinusoidal or learned), perturbs every bias and LayerNorm so that
none sits at its trivial initial value, and writes under tests/golden/<name>/:

  config.json          the tessel-model Config
  model.safetensors    the float32 weights, with the names tessel-model loads
  expected.safetensors `src` (I32), `tgt_in` (I32, BOS first), `logits` (F32 [len(tgt_in), V]:
                       the teacher-forced forward pass), `greedy` (I32: greedy decode from BOS,
                       EOS included if produced) and `greedy_margin` (F32: the smallest top-1
                       minus top-2 logit gap along the greedy path)

The reference forward passes run in float64 on the float32-rounded weights, so the fixtures
hold the exact answer for the weights the Rust side loads.

Setup (runs on CPU; only PyPI is reachable, whose Linux torch wheel is the CUDA build: it runs
on CPU but `import torch` needs its nvidia-* dependencies present, ~3 GB; installing it with
`--no-deps` fails at import with "libcudart.so.13: cannot open shared object file"):
    python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch numpy safetensors
    /tmp/tvenv/bin/python tools/make_golden.py
Checked with torch 2.15.0. The Rust tests never need torch: they read the committed fixtures.
"""

import json
import math
import os

import numpy as np
import torch
from torch import nn
from safetensors.numpy import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")

CONFIGS = {
    # The 2017 paper / nn.Transformer default placement: post-LN, ReLU, separate vocabularies.
    "post_relu": dict(
        d_model=32, heads=4, encoder_layers=2, decoder_layers=2, d_ff=64,
        src_vocab=29, tgt_vocab=31, share_embeddings=False, tie_output=False,
        norm="post", activation="relu", positions="sinusoidal", layer_norm_eps=1e-5,
        src_len=11, tgt_len=9, greedy_steps=12,
    ),
    # Pre-LN (norm_first=True), exact GELU, three layers each side.
    "pre_gelu": dict(
        d_model=48, heads=4, encoder_layers=3, decoder_layers=3, d_ff=96,
        src_vocab=37, tgt_vocab=41, share_embeddings=False, tie_output=False,
        norm="pre", activation="gelu", positions="sinusoidal", layer_norm_eps=1e-5,
        src_len=13, tgt_len=10, greedy_steps=14,
    ),
    # Odd sizes: d_model 72 with 3 heads (d_head 24), 1 encoder and 3 decoder layers, shared and
    # tied vocabulary, learned positions, eps 1e-6.
    "odd_72x3": dict(
        d_model=72, heads=3, encoder_layers=1, decoder_layers=3, d_ff=100,
        src_vocab=43, tgt_vocab=43, share_embeddings=True, tie_output=True,
        norm="post", activation="gelu", positions="learned", layer_norm_eps=1e-6,
        src_len=7, tgt_len=12, greedy_steps=15,
    ),
}

MAX_LEN = 24
BOS, EOS, PAD = 1, 2, 0


def sinusoidal(rows, d):
    table = np.zeros((rows, d), dtype=np.float64)
    for pos in range(rows):
        for i in range(0, d, 2):
            angle = pos / 10000.0 ** (i / d)
            table[pos, i] = math.sin(angle)
            if i + 1 < d:
                table[pos, i + 1] = math.cos(angle)
    return torch.tensor(table)


class Seq2Seq(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.c = c
        self.transformer = nn.Transformer(
            d_model=d, nhead=c["heads"], num_encoder_layers=c["encoder_layers"],
            num_decoder_layers=c["decoder_layers"], dim_feedforward=c["d_ff"], dropout=0.0,
            activation=c["activation"], batch_first=True, norm_first=c["norm"] == "pre",
            layer_norm_eps=c["layer_norm_eps"],
        )
        self.tgt_embed = nn.Embedding(c["tgt_vocab"], d)
        self.src_embed = self.tgt_embed if c["share_embeddings"] else nn.Embedding(c["src_vocab"], d)
        self.generator = nn.Linear(d, c["tgt_vocab"])
        if c["tie_output"]:
            self.generator.weight = self.tgt_embed.weight
        if c["positions"] == "learned":
            self.src_pos = nn.Embedding(MAX_LEN, d)
            self.tgt_pos = nn.Embedding(MAX_LEN, d)

    def positions(self, which, n):
        if self.c["positions"] == "learned":
            return getattr(self, which).weight[:n]
        return sinusoidal(n, self.c["d_model"]).to(self.tgt_embed.weight.dtype)

    def embed(self, table, pos, tokens):
        scale = math.sqrt(self.c["d_model"])
        return table(tokens) * scale + self.positions(pos, tokens.shape[1])

    def forward(self, src, tgt):
        n = tgt.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, dtype=self.tgt_embed.weight.dtype)
        out = self.transformer(
            self.embed(self.src_embed, "src_pos", src),
            self.embed(self.tgt_embed, "tgt_pos", tgt),
            tgt_mask=mask,
            tgt_is_causal=True,
        )
        return self.generator(out)


def perturb(model, gen):
    """Moves every bias and LayerNorm off its initial value; embeddings to variance 1/d."""
    d = model.c["d_model"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed" in name or "_pos" in name:
                p.uniform_(-math.sqrt(3.0 / d), math.sqrt(3.0 / d), generator=gen)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.4 * (torch.rand(p.shape, generator=gen) - 0.5))
            elif name.endswith("bias"):
                p.copy_(0.2 * (torch.rand(p.shape, generator=gen) - 0.5))


def export_weights(model, c):
    tensors = {}
    for name, p in model.state_dict().items():
        if name.startswith("transformer."):
            name = name[len("transformer."):]
        if c["share_embeddings"] and name.startswith("src_embed."):
            continue
        if c["tie_output"] and name == "generator.weight":
            continue
        tensors[name] = p.detach().to(torch.float32).contiguous().numpy()
    return tensors


def rust_config(c):
    return dict(
        d_model=c["d_model"], heads=c["heads"], encoder_layers=c["encoder_layers"],
        decoder_layers=c["decoder_layers"], d_ff=c["d_ff"], src_vocab=c["src_vocab"],
        tgt_vocab=c["tgt_vocab"], share_embeddings=c["share_embeddings"],
        tie_output=c["tie_output"], max_src_len=MAX_LEN, max_tgt_len=MAX_LEN, max_beam=4,
        norm=c["norm"], final_norm=True, activation=c["activation"], positions=c["positions"],
        biases=dict(attention_in=True, attention_out=True, ffn=True, generator=True),
        scale_embeddings=True, layer_norm_eps=c["layer_norm_eps"], bos_id=BOS, eos_id=EOS,
        pad_id=PAD,
    )


def greedy(model, src, steps):
    tokens = [BOS]
    margin = float("inf")
    out = []
    for _ in range(steps):
        logits = model(src, torch.tensor([tokens]))[0, -1]
        top = torch.topk(logits, 2)
        margin = min(margin, float(top.values[0] - top.values[1]))
        token = int(top.indices[0])
        out.append(token)
        tokens.append(token)
        if token == EOS:
            break
    return out, margin


BEAM, BEAM_STEPS, BEAM_ALPHA = 3, 8, 1.0


def beam_search(model, src, vocab):
    """The beam search tessel implements, written plainly: best 2B continuations per step,
    EOS ends a hypothesis (score / length^alpha), stop at B finished or BEAM_STEPS."""
    beams = [([], 0.0)]
    finished = []
    boundary = float("inf")
    for step in range(BEAM_STEPS):
        length = step + 1
        cands = []
        for b, (tokens, score) in enumerate(beams):
            logits = model(src, torch.tensor([[BOS] + tokens]))[0, -1]
            lp = torch.log_softmax(logits, dim=-1)
            cands.extend((score + float(lp[t]), b, t) for t in range(vocab))
        cands.sort(key=lambda c: -c[0])
        k = 2 * BEAM
        if len(cands) > k:
            boundary = min(boundary, cands[k - 1][0] - cands[k][0])
        new = []
        for score, b, token in cands[:k]:
            if token == EOS:
                if len(finished) < BEAM:
                    finished.append((beams[b][0] + [token], score / length ** BEAM_ALPHA))
            elif len(new) < BEAM:
                new.append((beams[b][0] + [token], score))
        if len(finished) >= BEAM or not new:
            break
        if length == BEAM_STEPS:
            for tokens, score in new[: BEAM - len(finished)]:
                finished.append((tokens, score / length ** BEAM_ALPHA))
            break
        beams = new
    finished.sort(key=lambda h: -h[1])
    return finished, boundary


def make(name, c, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Seq2Seq(c)
    perturb(model, gen)
    model.eval()
    weights = export_weights(model, c)
    # Reference in float64 on exactly the float32 weights that are exported.
    model = model.to(torch.float64)
    with torch.no_grad():
        for attempt in range(50):
            g = torch.Generator().manual_seed(seed * 100 + attempt)
            src = torch.randint(3, c["src_vocab"], (1, c["src_len"]), generator=g)
            tgt = torch.randint(3, c["tgt_vocab"], (1, c["tgt_len"]), generator=g)
            tgt[0, 0] = BOS
            logits = model(src, tgt)[0]
            tokens, margin = greedy(model, src, c["greedy_steps"])
            hyps, boundary = beam_search(model, src, c["tgt_vocab"])
            if margin > 1e-3 and boundary > 1e-4:
                break
        else:
            raise SystemExit(f"{name}: no source with a clear greedy path")
    out = os.path.join(ROOT, name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(rust_config(c), f, indent=2)
        f.write("\n")
    save_file(weights, os.path.join(out, "model.safetensors"))
    save_file(
        {
            "src": src[0].to(torch.int32).numpy(),
            "tgt_in": tgt[0].to(torch.int32).numpy(),
            "logits": logits.to(torch.float32).numpy(),
            "greedy": np.array(tokens, dtype=np.int32),
            "greedy_margin": np.array([margin], dtype=np.float32),
            # Beam hypotheses, best first, padded with -1 to BEAM_STEPS.
            "beam_tokens": np.array(
                [h[0] + [-1] * (BEAM_STEPS - len(h[0])) for h in hyps], dtype=np.int32
            ),
            "beam_scores": np.array([h[1] for h in hyps], dtype=np.float32),
            "beam_options": np.array([BEAM, BEAM_STEPS, BEAM_ALPHA], dtype=np.float32),
        },
        os.path.join(out, "expected.safetensors"),
    )
    print(f"{name}: src {src.shape[1]}, tgt {tgt.shape[1]}, greedy {tokens} "
          f"(margin {margin:.4f}), logit range {float(logits.abs().max()):.3f}, "
          f"beam {[(h[0], round(h[1], 4)) for h in hyps]} (boundary gap {boundary:.5f})")


def main():
    torch.set_grad_enabled(False)
    for i, (name, c) in enumerate(CONFIGS.items()):
        make(name, c, seed=1234 + i)


if __name__ == "__main__":
    main()
