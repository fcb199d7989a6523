"""Builds a random-weight CTranslate2 TransformerSpec model with CTranslate2's own spec API.

Usage: make_model.py OUT_DIR [--layers N] [--d-model N] [--heads N] [--d-ff N] [--vocab N]
       [--pre-norm] [--shared] [--learned-positions N] [--activation relu|gelu|gelutanh|swish]
       [--quantization float32|float16|bfloat16|int8|int16] [--seed N]

Weights are Gaussian with standard deviation `gain / sqrt(fan_in)` (`--gain`, 1.5 for the tiny
test fixtures, 0.5 for Transformer-base, whose 18 post-norm sublayers would otherwise wash out the
previous token; the output projection keeps `3 / sqrt(d_model)`), embeddings with standard
deviation 1, LayerNorm gamma around 1 and beta around 0, biases with
standard deviation 0.1): large enough that the decoder's output depends strongly on its input, so
greedy decoding does not collapse onto one repeated token. The output bias of EOS is set to -1e4
so that neither engine ever emits EOS: every search runs to its maximum length on both sides.
"""

import argparse
import os

import numpy as np
import ctranslate2
from ctranslate2.specs import common_spec, transformer_spec


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--pre-norm", action="store_true")
    p.add_argument("--shared", action="store_true")
    p.add_argument("--learned-positions", type=int, default=0)
    p.add_argument("--activation", default="relu")
    p.add_argument("--quantization", default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gain", type=float, default=1.5)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    d, ff, v = a.d_model, a.d_ff, a.vocab

    def mat(out, inp):
        return (rng.standard_normal((out, inp)) * a.gain / np.sqrt(inp)).astype(np.float32)

    def vec(n, mean=0.0, std=0.1):
        return (mean + rng.standard_normal(n) * std).astype(np.float32)

    def norm(spec):
        spec.gamma = vec(d, 1.0, 0.1)
        spec.beta = vec(d)

    def linear(spec, out, inp):
        spec.weight = mat(out, inp)
        spec.bias = vec(out)

    def ffn(spec):
        norm(spec.layer_norm)
        linear(spec.linear_0, ff, d)
        linear(spec.linear_1, d, ff)

    activation = {
        "relu": common_spec.Activation.RELU,
        "gelu": common_spec.Activation.GELU,
        "gelutanh": common_spec.Activation.GELUTanh,
        "swish": common_spec.Activation.SWISH,
    }[a.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        a.layers, a.heads, pre_norm=a.pre_norm, activation=activation
    )
    enc, dec = spec.encoder, spec.decoder
    src_embed = rng.standard_normal((v, d)).astype(np.float32)
    enc.embeddings[0].weight = src_embed
    dec.embeddings.weight = src_embed if a.shared else (
        rng.standard_normal((v, d)).astype(np.float32))
    if a.learned_positions:
        enc.position_encodings.encodings = vec(a.learned_positions * d, 0, 0.5).reshape(-1, d)
        dec.position_encodings.encodings = vec(a.learned_positions * d, 0, 0.5).reshape(-1, d)
    for layer in enc.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        ffn(layer.ffn)
    for layer in dec.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.attention.layer_norm)
        linear(layer.attention.linear[0], d, d)
        linear(layer.attention.linear[1], 2 * d, d)
        linear(layer.attention.linear[2], d, d)
        # The cross-attention output is nearly the same at every step; keep it from drowning
        # the part of the residual stream that depends on the previous tokens.
        layer.attention.linear[2].weight *= 0.3
        ffn(layer.ffn)
    if a.pre_norm:
        norm(enc.layer_norm)
        norm(dec.layer_norm)
    linear(dec.projection, v, d)
    dec.projection.weight *= 2.0 * 1.5 / a.gain
    dec.projection.bias[2] = -1e4  # EOS is never the best token (see the module doc).
    tokens = ["<blank>", "<s>", "</s>"] + ["t%d" % i for i in range(3, v)]
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.validate()
    spec.optimize(quantization=a.quantization)
    os.makedirs(a.out, exist_ok=True)
    spec.save(a.out)


if __name__ == "__main__":
    main()
