#!/usr/bin/env python3
"""Builds tests/translation/led/: a random-weight LEDForConditionalGeneration and what
`transformers` computes on it in float64.

LED (Longformer Encoder-Decoder, allenai/led-base-16384) is BART with Longformer
self-attention in the encoder: each query sees the keys within `attention_window / 2` of it,
plus the tokens with global attention; those tokens attend to every position through their own
query, key and value projections (`query_global`, `key_global`, `value_global`). The model
cards put global attention on the first token.

The fixture: d_model 32, 4 heads, ffn 64, 2 encoder and 2 decoder layers, a 263-token BART
vocabulary (`<s> <pad> </s> <unk>` first, `<mask>` last, as tools/make_translation_golden.py
lays it out), `attention_window` [4, 6] (one-sided 2 and 3: windows that differ per layer),
learned positions without offset (64 encoder, 32 decoder), GELU, post-LN with
`layernorm_embedding`, decoder start `</s>`, forced BOS `<s>`. The source is 23 tokens, not a
multiple of either window and several windows long, so the band is cut at both ends and in the
middle.

Files in tests/translation/led/:
  hf/                   save_pretrained (float32) and the word-level tokenizer
  expected.safetensors  `src_ids` [23]; `decoder_input_ids` [9]; `logits` F64 [9, 263]
                        (teacher-forced, global attention on the first token); `greedy_tokens`,
                        `beam4_tokens` [11] (generate with that global attention, float64, the
                        decoder start first); `logits_global0`, `logits_global3`: the
                        teacher-forced logits with global attention on no token and on the
                        first 3; `greedy_margin` F64 [1]
  stats.json            the figures printed below

Usage: python3 tools/make_led_golden.py  (torch, transformers, tokenizers, safetensors, numpy;
checked with torch 2.15.0, transformers 5.24.0).
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_translation_golden import build_tokenizer, vocabulary  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "translation")
C = dict(family="bart", d_model=32, heads=4, ffn=64, vocab=263, seed=41, gain=1.5,
         embed_std=1.0, pos_std=1.0, cross_out=0.3, windows=[4, 6], src_len=23)
MAX_NEW = 10
GLOBALS = (0, 1, 3)


def make_model():
    from transformers import GenerationConfig, LEDConfig, LEDForConditionalGeneration

    tokens, ids = vocabulary(C)
    cfg = LEDConfig(vocab_size=len(tokens), d_model=C["d_model"], encoder_layers=2,
                    decoder_layers=2, encoder_attention_heads=C["heads"],
                    decoder_attention_heads=C["heads"], encoder_ffn_dim=C["ffn"],
                    decoder_ffn_dim=C["ffn"], max_encoder_position_embeddings=64,
                    max_decoder_position_embeddings=32, attention_window=C["windows"],
                    activation_function="gelu", dropout=0.0, attention_dropout=0.0,
                    activation_dropout=0.0, bos_token_id=0, pad_token_id=1, eos_token_id=2,
                    decoder_start_token_id=2)
    torch.manual_seed(C["seed"])
    model = LEDForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(
        max_length=32, num_beams=1, do_sample=False, decoder_start_token_id=2, bos_token_id=0,
        eos_token_id=2, pad_token_id=1, forced_bos_token_id=0)
    init_weights(model, ids)
    return model, ids


def init_weights(model, ids):
    g = torch.Generator().manual_seed(C["seed"])

    def normal(t, std, mean=0.0):
        with torch.no_grad():
            t.copy_(mean + std * torch.randn(t.shape, generator=g, dtype=torch.float64))

    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            normal(mod.weight, C["gain"] / np.sqrt(mod.in_features))
            if mod.bias is not None:
                normal(mod.bias, 0.1)
        elif isinstance(mod, torch.nn.LayerNorm):
            normal(mod.weight, 0.1, 1.0)
            normal(mod.bias, 0.1)
    base = model.led
    normal(base.shared.weight, C["embed_std"])
    for part in (base.encoder, base.decoder):
        normal(part.embed_positions.weight, C["pos_std"])
    with torch.no_grad():
        base.shared.weight[ids["<pad>"]] = 0.0
        base.shared.weight[ids["</s>"]] = 0.0
        for layer in base.decoder.layers:
            layer.encoder_attn.out_proj.weight *= C["cross_out"]
    assert model.lm_head.weight.data_ptr() == base.shared.weight.data_ptr()


def global_mask(n, g):
    mask = torch.zeros((1, n), dtype=torch.long)
    mask[0, :g] = 1
    return mask


def generate(model, src, beams):
    out = model.generate(input_ids=torch.tensor([src]), global_attention_mask=global_mask(len(src), 1),
                         max_new_tokens=MAX_NEW, do_sample=False, num_beams=beams,
                         length_penalty=1.0, early_stopping=True, repetition_penalty=1.0,
                         no_repeat_ngram_size=0, forced_eos_token_id=None)
    return [int(t) for t in out[0].tolist()]


def run(model, src, forced):
    """Teacher-forced logits with global attention on the first g tokens, for each g."""
    src_t, dec_t = torch.tensor([src]), torch.tensor([forced])
    with torch.no_grad():
        return {g: model(input_ids=src_t, global_attention_mask=global_mask(len(src), g),
                         decoder_input_ids=dec_t).logits[0].numpy() for g in GLOBALS}


def margin_along(model, src, seq, n_forced):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([src]), global_attention_mask=global_mask(len(src), 1),
                       decoder_input_ids=torch.tensor([seq[:-1]])).logits[0]
    return min(float(torch.topk(logits[i], 2).values[0] - torch.topk(logits[i], 2).values[1])
               for i in range(n_forced - 1, len(seq) - 1))


def main():
    out = os.path.join(ROOT, "led")
    if os.path.exists(out):
        shutil.rmtree(out)
    hf_dir = os.path.join(out, "hf")
    os.makedirs(hf_dir)
    model, ids = make_model()
    model.save_pretrained(hf_dir, safe_serialization=True)
    build_tokenizer(C, hf_dir)

    rng = np.random.default_rng(C["seed"])
    words = [ids["w%d" % i] for i in rng.integers(0, 250, C["src_len"] - 2)]
    src = [ids["<s>"]] + words + [ids["</s>"]]
    prefix = [ids["</s>"], ids["<s>"]]
    forced = prefix + [ids["w%d" % i] for i in rng.integers(0, 250, 9 - len(prefix))]

    model32 = model.float()
    log32 = run(model32, src, forced)
    greedy32, beam32 = generate(model32, src, 1), generate(model32, src, 4)
    model64 = model.double()
    log64 = run(model64, src, forced)
    greedy, beam = generate(model64, src, 1), generate(model64, src, 4)
    assert greedy[:2] == prefix, greedy
    margin = margin_along(model64, src, greedy, len(prefix))

    i64 = lambda xs: np.asarray(xs, dtype=np.int64)
    tensors = {
        "src_ids": i64(src),
        "decoder_input_ids": i64(forced),
        "logits": log64[1],
        "greedy_tokens": i64(greedy),
        "beam4_tokens": i64(beam),
        "greedy_margin": np.asarray([margin], dtype=np.float64),
    }
    for g in GLOBALS:
        if g != 1:
            tensors["logits_global%d" % g] = log64[g]
    save_file(tensors, os.path.join(out, "expected.safetensors"))
    stats = {
        "src": src, "decoder_input_ids": forced, "greedy": greedy, "beam4": beam,
        "distinct_generated_greedy": len(set(greedy[2:])), "greedy_margin": margin,
        "hf_f32_greedy_equal": greedy32 == greedy, "hf_f32_beam4_equal": beam32 == beam,
        "logit_scale": [float(np.abs(log64[g]).max()) for g in GLOBALS],
        "logits_f32_max_abs": [float(np.abs(log32[g] - log64[g]).max()) for g in GLOBALS],
        "logits_differ_from_global0": [float(np.abs(log64[g] - log64[0]).max()) for g in GLOBALS],
    }
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
