#!/usr/bin/env python3
"""Builds tests/translation/longt5_local/: a random-weight LongT5ForConditionalGeneration with
local encoder attention (google/long-t5-local-base's graph) and what `transformers` computes on
it in float64; with `tglobal`, tests/translation/longt5_tglobal/: the same with transient-global
encoder attention (google/long-t5-tglobal-base's graph).

LongT5's local attention: each encoder query sees the keys within `local_radius` positions of it
(transformers splits the source into blocks of `local_radius + 1` and masks each query's three
blocks to that distance), with T5's bucketed relative position bias of block 0 on every layer;
the decoder is T5's. As the published checkpoints: gated GELU, `tie_word_embeddings` false, which
transformers 5 reads as an unscaled decoder output on the shared table.

The fixture: d_model 32, 4 heads of d_kv 8, d_ff 64, 2 + 2 layers, the t5 vocabulary layout of
tools/make_translation_golden.py (250 tokens: `<pad> </s> <unk>` then words), `local_radius` 3,
8 relative buckets up to distance 12 (so logarithmic buckets occur inside the window), seed 43.
The source is 23 tokens: several windows, so every query's band is cut by the radius.

Files in tests/translation/longt5_local/:
  hf/                   save_pretrained (float32) and the word-level tokenizer
  expected.safetensors  `src_ids` [23]; `decoder_input_ids` [9]; `logits` F64 [9, 250]
                        (teacher-forced); `greedy_tokens`, `beam4_tokens` [11] (generate,
                        float64, the decoder start first); `greedy_margin` F64 [1]
  stats.json            the figures printed

Transient-global (`tglobal`): each encoder query also sees one side key per block of
`global_block_size` = 4 source positions (the block's summed inputs through the layer's
`global_input_layer_norm`, K and V), with block 0's `global_relative_attention_bias` by block
distance; seed 44 (43 collapses greedy decoding onto one token). The source is 27 tokens: 6 blocks, the last 3 tokens an orphan tail joining block 5,
every window cut by the radius. expected.safetensors also holds `short_src_ids` [3] (shorter
than a block: no side key) and `short_logits` F64 [9, 250] (teacher-forced on it).

Usage: python3 tools/make_longt5_golden.py [local|tglobal]  (torch, transformers, tokenizers,
safetensors, numpy; checked with torch 2.15.0, transformers 5.24.0).
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
C = dict(family="t5", d_model=32, heads=4, d_kv=8, ffn=64, vocab=250, seed=43, gain=2.5,
         embed_std=1.0, rel_std=1.0, cross_out=0.3, radius=3, buckets=8, max_distance=12,
         src_len=23)
TGLOBAL = dict(C, attention="transient-global", global_block=4, src_len=27, short_len=3,
               seed=44)
MAX_NEW = 10


def make_model():
    from transformers import GenerationConfig, LongT5Config, LongT5ForConditionalGeneration

    tokens, ids = vocabulary(C)
    extra = {}
    if "global_block" in C:
        extra["global_block_size"] = C["global_block"]
    cfg = LongT5Config(vocab_size=len(tokens), d_model=C["d_model"], d_kv=C["d_kv"],
                       d_ff=C["ffn"], num_layers=2, num_decoder_layers=2, num_heads=C["heads"],
                       local_radius=C["radius"],
                       encoder_attention_type=C.get("attention", "local"), **extra,
                       relative_attention_num_buckets=C["buckets"],
                       relative_attention_max_distance=C["max_distance"],
                       feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                       dropout_rate=0.0, layer_norm_epsilon=1e-6, pad_token_id=0,
                       eos_token_id=1, decoder_start_token_id=0)
    torch.manual_seed(C["seed"])
    model = LongT5ForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(max_length=32, num_beams=1, do_sample=False,
                                               decoder_start_token_id=0, eos_token_id=1,
                                               pad_token_id=0)
    init_weights(model, ids)
    return model, ids


def init_weights(model, ids):
    g = torch.Generator().manual_seed(C["seed"])

    def normal(t, std, mean=0.0):
        with torch.no_grad():
            t.copy_(mean + std * torch.randn(t.shape, generator=g, dtype=torch.float64))

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            std = C["gain"] / np.sqrt(mod.in_features)
            if name.endswith((".q",)):
                std /= np.sqrt(C["d_kv"])  # T5 has no 1/sqrt(d_kv) in attention
            if ".EncDecAttention.o" in name:
                std *= C["cross_out"]
            normal(mod.weight, std)
        elif type(mod).__name__ == "LongT5LayerNorm":
            normal(mod.weight, 0.1, 1.0)
        elif isinstance(mod, torch.nn.Embedding) and "relative_attention_bias" in name:
            normal(mod.weight, C["rel_std"])
    normal(model.shared.weight, C["embed_std"])
    with torch.no_grad():
        model.shared.weight[ids["</s>"]] = 0.0
    assert model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr()


def generate(model, src, beams):
    out = model.generate(input_ids=torch.tensor([src]), max_new_tokens=MAX_NEW, do_sample=False,
                         num_beams=beams, length_penalty=1.0, early_stopping=True,
                         repetition_penalty=1.0, no_repeat_ngram_size=0)
    return [int(t) for t in out[0].tolist()]


def logits_of(model, src, forced):
    with torch.no_grad():
        return model(input_ids=torch.tensor([src]),
                     decoder_input_ids=torch.tensor([forced])).logits[0].numpy()


def main():
    global C
    name = "longt5_local"
    if sys.argv[1:] == ["tglobal"]:
        C, name = TGLOBAL, "longt5_tglobal"
    elif sys.argv[1:] not in ([], ["local"]):
        sys.exit("usage: make_longt5_golden.py [local|tglobal]")
    out = os.path.join(ROOT, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    hf_dir = os.path.join(out, "hf")
    os.makedirs(hf_dir)
    model, ids = make_model()
    model.save_pretrained(hf_dir, safe_serialization=True)
    build_tokenizer(C, hf_dir)

    rng = np.random.default_rng(C["seed"])
    src = [ids["w%d" % i] for i in rng.integers(0, 240, C["src_len"] - 1)] + [ids["</s>"]]
    forced = [0] + [ids["w%d" % i] for i in rng.integers(0, 240, 8)]
    short = src[:C["short_len"] - 1] + [ids["</s>"]] if "short_len" in C else None

    model32 = model.float()
    log32 = logits_of(model32, src, forced)
    greedy32, beam32 = generate(model32, src, 1), generate(model32, src, 4)
    model64 = model.double()
    log64 = logits_of(model64, src, forced)
    greedy, beam = generate(model64, src, 1), generate(model64, src, 4)
    along = logits_of(model64, src, greedy[:-1])
    margin = min(float(np.sort(r)[-1] - np.sort(r)[-2]) for r in along)

    i64 = lambda xs: np.asarray(xs, dtype=np.int64)
    tensors = {
        "src_ids": i64(src), "decoder_input_ids": i64(forced), "logits": log64,
        "greedy_tokens": i64(greedy), "beam4_tokens": i64(beam),
        "greedy_margin": np.asarray([margin], dtype=np.float64),
    }
    if short is not None:
        tensors["short_src_ids"] = i64(short)
        tensors["short_logits"] = logits_of(model64, short, forced)
    save_file(tensors, os.path.join(out, "expected.safetensors"))
    stats = {
        "src": src, "decoder_input_ids": forced, "greedy": greedy, "beam4": beam,
        "distinct_generated_greedy": len(set(greedy[1:])), "greedy_margin": margin,
        "hf_f32_greedy_equal": greedy32 == greedy, "hf_f32_beam4_equal": beam32 == beam,
        "logit_scale": float(np.abs(log64).max()),
        "logits_f32_max_abs": float(np.abs(log32 - log64).max()),
    }
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
