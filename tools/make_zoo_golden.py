#!/usr/bin/env python3
"""Builds the translation fixtures of published checkpoint layouts that tests/translation's
first fixtures do not cover, in the same format (see tests/translation/README.md):

  marian_untied     MarianMTModel with `tie_word_embeddings: false`, as transformers 5 saves it:
                    `model.shared`, `model.encoder.embed_tokens`, `model.decoder.embed_tokens`
                    and `lm_head` are four different tensors; the stacks read their own tables,
                    the projection `lm_head`, and nothing reads `model.shared`.
  marian_untied_v4  the same untied layout as transformers 4 saved it: only `model.shared`
                    (which both stacks read) and `lm_head`. transformers 5 cannot load this
                    (it initialises the stacks' tables at random), so the reference is the
                    in-memory model with both tables set to `model.shared`.
  marian_separate   Marian with separate vocabularies (`share_encoder_decoder_embeddings:
                    false`, source 300 and target 260 tokens), `lm_head` tied to the decoder's
                    table.
Neither marian_untied_v4 nor marian_separate has a CTranslate2 directory: the converter loads
hf/ through transformers 5 (random tables for the v4 layout) and registers one vocabulary for
both sides.
  t5_v1_1           T5 v1.1 / Flan-T5 / mT5-small layout: 6 heads of d_kv 16 over d_model 32
                    (attention width 96 != d_model), gated-gelu, and the files of those
                    checkpoints: config.json with `tie_word_embeddings: false` (no
                    `scale_decoder_outputs`, as transformers 4 wrote it), a distinct
                    `lm_head.weight`, byte copies of `shared.weight` under
                    `{encoder,decoder}.embed_tokens.weight`, and the unused
                    `decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight`.
  pegasus_computed  PegasusForConditionalGeneration (pre-LN, final norms, ReLU, √d embedding
                    scale, `final_logits_bias`, tied) whose file holds no position tables, so
                    that `transformers` computes its sinusoids (Marian's formula) and tessel
                    must too; `transformers` 5 itself writes the tables.

The references are run on the directory as `from_pretrained` loads it (except
marian_untied_v4, see above), in float64; CTranslate2 directories are converted from hf/ with
`TransformersConverter` in float32.

Usage: python3 tools/make_zoo_golden.py [name ...]   (torch, transformers, ctranslate2,
tokenizers, safetensors, numpy; checked with torch 2.15.0, transformers 5.24.0,
ctranslate2 4.8.5). The Rust tests never need Python.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file as save_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_translation_golden as base  # noqa: E402
from make_translation_golden import ROOT, save_file  # noqa: E402

VARIANTS = {
    "marian_untied": dict(family="marian", d_model=48, heads=3, ffn=96, vocab=301, seed=31,
                          gain=1.0, embed_std=1.0, head_std=3.0, cross_out=0.3, layout="v5"),
    "marian_untied_v4": dict(family="marian", d_model=48, heads=3, ffn=96, vocab=301, seed=32,
                             gain=1.0, embed_std=3.0, head_std=3.0, cross_out=0.3,
                             layout="v4"),
    "marian_separate": dict(family="marian", d_model=48, heads=3, ffn=96, vocab=300,
                            target_vocab=260, seed=31, gain=1.5, embed_std=3.0,
                            cross_out=0.3, layout="separate"),
    "t5_v1_1": dict(family="t5", d_model=32, heads=6, d_kv=16, ffn=64, vocab=257, seed=34,
                    ff="gated-gelu", tied=False, buckets=8, max_distance=12, gain=2.5,
                    embed_std=1.0, rel_std=1.0, cross_out=0.3, head_std=1.0),
    "pegasus_computed": dict(family="pegasus", d_model=48, heads=3, ffn=96, vocab=301, seed=38,
                             gain=4.0, embed_std=0.05, cross_out=1.0),
}


def normal_(t, std, g, mean=0.0):
    with torch.no_grad():
        t.copy_(mean + std * torch.randn(t.shape, generator=g, dtype=torch.float64))


def init_layers(model, c, g):
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            normal_(mod.weight, c["gain"] / np.sqrt(mod.in_features), g)
            if mod.bias is not None:
                normal_(mod.bias, 0.1, g)
        elif isinstance(mod, torch.nn.LayerNorm):
            normal_(mod.weight, 0.1, g, 1.0)
            normal_(mod.bias, 0.1, g)
        elif type(mod).__name__ == "T5LayerNorm":
            normal_(mod.weight, 0.1, g, 1.0)


def marian(c):
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    separate = c["layout"] == "separate"
    tgt_n = c.get("target_vocab", c["vocab"])
    pad, eos = tgt_n - 1, 0
    cfg = MarianConfig(vocab_size=c["vocab"], decoder_vocab_size=tgt_n if separate else None,
                       d_model=c["d_model"], encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=c["heads"], decoder_attention_heads=c["heads"],
                       encoder_ffn_dim=c["ffn"], decoder_ffn_dim=c["ffn"],
                       max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                       activation_dropout=0.0, activation_function="swish",
                       scale_embedding=True, share_encoder_decoder_embeddings=not separate,
                       tie_word_embeddings=separate, pad_token_id=pad, eos_token_id=eos,
                       decoder_start_token_id=pad, forced_eos_token_id=eos)
    torch.manual_seed(c["seed"])
    model = MarianMTModel(cfg).eval()
    model.generation_config = GenerationConfig(
        max_length=64, num_beams=1, do_sample=False, decoder_start_token_id=pad,
        eos_token_id=eos, pad_token_id=pad, forced_eos_token_id=eos, bad_words_ids=[[pad]])
    g = torch.Generator().manual_seed(c["seed"])
    init_layers(model, c, g)
    m = model.model
    tables = [m.encoder.embed_tokens.weight, m.decoder.embed_tokens.weight]
    if getattr(m, "shared", None) is not None:
        tables.append(m.shared.weight)
    for t in tables:
        normal_(t, c["embed_std"], g)
    if not separate:
        normal_(model.lm_head.weight, c["head_std"], g)
    with torch.no_grad():
        for t in tables:
            if t.shape[0] == tgt_n:
                t[pad] = 0.0
            t[eos] = 0.0
        if c["layout"] == "v4":
            m.encoder.embed_tokens.weight.copy_(m.shared.weight)
            m.decoder.embed_tokens.weight.copy_(m.shared.weight)
        model.lm_head.weight[eos] = 0.0
        for layer in m.decoder.layers:
            layer.encoder_attn.out_proj.weight *= c["cross_out"]
    normal_(model.final_logits_bias, 0.1, g)
    with torch.no_grad():
        model.final_logits_bias[0, eos] = -1.0
    return model, pad


def t5(c):
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=c["vocab"], d_model=c["d_model"], d_kv=c["d_kv"], d_ff=c["ffn"],
                   num_layers=2, num_decoder_layers=2, num_heads=c["heads"],
                   relative_attention_num_buckets=c["buckets"],
                   relative_attention_max_distance=c["max_distance"],
                   feed_forward_proj=c["ff"], tie_word_embeddings=False, dropout_rate=0.0,
                   layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1,
                   decoder_start_token_id=0)
    torch.manual_seed(c["seed"])
    model = T5ForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(max_length=64, num_beams=1, do_sample=False,
                                               decoder_start_token_id=0, eos_token_id=1,
                                               pad_token_id=0)
    g = torch.Generator().manual_seed(c["seed"])
    init_layers(model, c, g)
    model.lm_head.weight = torch.nn.Parameter(torch.empty(c["vocab"], c["d_model"]))
    normal_(model.shared.weight, c["embed_std"], g)
    normal_(model.lm_head.weight, c["head_std"], g)
    for stack in (model.encoder, model.decoder):
        for block in stack.block:
            att = block.layer[0].SelfAttention
            with torch.no_grad():
                att.q.weight /= np.sqrt(c["d_kv"])
                if stack is model.decoder:
                    block.layer[1].EncDecAttention.q.weight /= np.sqrt(c["d_kv"])
                    block.layer[1].EncDecAttention.o.weight *= c["cross_out"]
            if att.has_relative_attention_bias:
                normal_(att.relative_attention_bias.weight, c["rel_std"], g)
    with torch.no_grad():
        model.lm_head.weight[1] = 0.0
    return model, 0


def pegasus(c):
    from transformers import GenerationConfig, PegasusConfig, PegasusForConditionalGeneration

    pad, eos = 0, 1
    cfg = PegasusConfig(vocab_size=c["vocab"], d_model=c["d_model"], encoder_layers=2,
                        decoder_layers=2, encoder_attention_heads=c["heads"],
                        decoder_attention_heads=c["heads"], encoder_ffn_dim=c["ffn"],
                        decoder_ffn_dim=c["ffn"], max_position_embeddings=64, dropout=0.0,
                        attention_dropout=0.0, activation_dropout=0.0,
                        activation_function="relu", scale_embedding=True, pad_token_id=pad,
                        eos_token_id=eos, decoder_start_token_id=pad, forced_eos_token_id=eos,
                        # The published configs' keys, which CTranslate2's converter reads.
                        normalize_before=True, add_final_layer_norm=True,
                        normalize_embedding=False, static_position_embeddings=True)
    torch.manual_seed(c["seed"])
    model = PegasusForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(
        max_length=64, num_beams=1, do_sample=False, decoder_start_token_id=pad,
        eos_token_id=eos, pad_token_id=pad, forced_eos_token_id=eos)
    g = torch.Generator().manual_seed(c["seed"])
    init_layers(model, c, g)
    m = model.model
    normal_(m.shared.weight, c["embed_std"], g)
    normal_(model.final_logits_bias, 0.1, g)
    with torch.no_grad():
        m.shared.weight[pad] = 0.0
        m.shared.weight[eos] = 0.0
        model.final_logits_bias[0, eos] = -1.0
        for layer in m.decoder.layers:
            layer.encoder_attn.out_proj.weight *= c["cross_out"]
    assert model.lm_head.weight.data_ptr() == m.shared.weight.data_ptr()
    return model, pad


def save_hf(name, c, model, hf_dir):
    """save_pretrained, then the file and config rewritten to the layout of the variant."""
    model.save_pretrained(hf_dir, safe_serialization=True)
    path = os.path.join(hf_dir, "model.safetensors")
    sd = {k: v.contiguous() for k, v in load_file(path).items()}
    if c.get("layout") == "v4":
        for k in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            sd.pop(k, None)
    if c["family"] == "pegasus":
        for k in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
            sd.pop(k)
    if c["family"] == "t5":
        sd["lm_head.weight"] = model.lm_head.weight.detach().float().contiguous()
        for k in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            sd[k] = sd["shared.weight"].clone()
        g = torch.Generator().manual_seed(c["seed"] + 1000)
        sd["decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"] = \
            torch.randn(c["buckets"], c["heads"], generator=g)
        cfg_path = os.path.join(hf_dir, "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg.pop("scale_decoder_outputs", None)
        cfg["tie_word_embeddings"] = False
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
    save_torch(sd, path, metadata={"format": "pt"})


def reference(name, c, model, hf_dir):
    """The float64 model transformers runs on hf/ (the in-memory one for the v4 layout)."""
    if c.get("layout") == "v4":
        return model.double().eval()
    cls = type(model)
    loaded = cls.from_pretrained(hf_dir, dtype=torch.float64).eval()
    return loaded


def build(name, c):
    import ctranslate2

    out = os.path.join(ROOT, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    hf_dir, ct2_dir = os.path.join(out, "hf"), os.path.join(out, "ct2")
    os.makedirs(hf_dir)
    model, start = {"marian": marian, "t5": t5, "pegasus": pegasus}[c["family"]](c)
    tokenizer_c = dict(c, vocab=c.get("target_vocab", c["vocab"]))
    base.build_tokenizer(tokenizer_c, hf_dir)
    save_hf(name, c, model, hf_dir)
    ref = reference(name, c, model, hf_dir)

    rng = np.random.default_rng(c["seed"])
    words = [int(x) for x in rng.integers(2, 200, 16)]
    eos = 0 if c["family"] == "marian" else 1
    src = words[:8] + [eos]
    forced = [start] + words[8:16]
    src_t, dec_t = torch.tensor([src]), torch.tensor([forced])
    with torch.no_grad():
        enc64 = ref.get_encoder()(input_ids=src_t).last_hidden_state[0].numpy()
        log64 = ref(input_ids=src_t, decoder_input_ids=dec_t).logits[0].numpy()
    greedy = base.hf_generate(ref, src, 1)
    beam = base.hf_generate(ref, src, 4)
    margin = base.margin_along(ref, src, greedy, 1)
    i64 = lambda xs: np.asarray(xs, dtype=np.int64)
    tensors = {
        "src_ids": i64(src),
        "decoder_input_ids": i64(forced),
        "logits": log64,
        "encoder_output": enc64,
        "greedy_tokens": i64(greedy),
        "beam4_tokens": i64(beam),
        "greedy_margin": np.asarray([margin], dtype=np.float64),
    }
    stats = {"name": name, "greedy": greedy, "beam4": beam, "greedy_margin": margin,
             "distinct_generated_greedy": len(set(greedy[1:])),
             "logit_scale": float(np.abs(log64).max())}
    # CTranslate2's converter loads hf/ through transformers 5, which cannot read the v4
    # layout, and registers one vocabulary for both sides of a separate-vocabulary Marian.
    if c.get("layout") not in ("separate", "v4"):
        ctranslate2.converters.TransformersConverter(hf_dir).convert(ct2_dir, quantization=None,
                                                                     force=True)
        with open(os.path.join(ct2_dir, "shared_vocabulary.json")) as f:
            ct2_tokens = json.load(f)
        ct2_greedy, _ = base.ct2_translate(ct2_dir, ct2_tokens, src, [start], 1)
        ct2_beam, _ = base.ct2_translate(ct2_dir, ct2_tokens, src, [start], 4)
        tensors.update(ct2_greedy_tokens=i64(ct2_greedy), ct2_beam4_tokens=i64(ct2_beam))
        stats.update(ct2_greedy=ct2_greedy, ct2_beam4=ct2_beam)
        stats.update(base.build_ct2_expected(name, out, ref, ct2_tokens, src, forced, [start],
                                             log64))
    save_file(tensors, os.path.join(out, "expected.safetensors"))
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))


def main():
    for name in sys.argv[1:] or list(VARIANTS):
        build(name, VARIANTS[name])


if __name__ == "__main__":
    main()
