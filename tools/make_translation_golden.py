#!/usr/bin/env python3
"""Builds the translation golden fixtures in tests/translation/ from Hugging Face `transformers`.

For each configuration in CONFIGS it builds a small random-weight encoder-decoder of one family
(MarianMTModel, BartForConditionalGeneration, MBartForConditionalGeneration,
M2M100ForConditionalGeneration, T5ForConditionalGeneration) from its config class (PyTorch on
CPU, fixed seeds), with a word-level `tokenizers` vocabulary whose special tokens sit where the
family puts them, and writes under tests/translation/<name>/:

  hf/        model.save_pretrained(safe_serialization=True) in float32: config.json,
             model.safetensors, generation_config.json; plus the tokenizer
             (tokenizer.json, tokenizer_config.json) that the CTranslate2 converter reads
  ct2/       hf/ converted by ctranslate2.converters.TransformersConverter, quantization=None
             (float32): model.bin, config.json, shared_vocabulary.json; none (nor the ct2_*
             files and tokens below) for configurations with ct2=False
  expected.safetensors  `src_ids`, `decoder_input_ids`, `logits` (F64 [len, vocab],
             teacher-forced, model.double()), `encoder_output` (F64 [src_len, d_model]),
             `greedy_tokens`, `beam4_tokens` (transformers generate, float64),
             `ct2_greedy_tokens`, `ct2_beam4_tokens` (CTranslate2 translate_batch, float32),
             `greedy_margin` (F64 [1]); token sequences start with the decoder start token
  ct2_f16/   (the families in HALF_FIXTURES) hf/ converted with quantization="float16": every
             non-scalar float variable stored as float16, scalars kept float32; ct2_bf16/ the
             same in bfloat16 (bart)
  ct2_expected.safetensors  what a reader of ct2/ (and ct2_f16/) must reproduce: `logits`
             (F64 [len, V'], the float64 teacher-forced logits of `expected.safetensors` cut
             to CTranslate2's vocabulary V' and multiplied by `output_scale`, CTranslate2's
             `decoder/scale_outputs` over the one transformers applies: 48^-0.5 for `t5`,
             1 elsewhere), `output_scale` (F64 [1]); for ct2_f16/ also `f16_logits` (the same
             from the float64 model whose parameters and buffers were rounded to float16, as
             the converter rounds them), `f16_greedy_tokens`, `f16_beam4_tokens`
             (CTranslate2 translate_batch on ct2_f16/, compute_type float32); for ct2_bf16/
             the same under `bf16_`
  names.txt  the HF state-dict keys and the model.bin variables, with shapes
  stats.json agreement figures quoted in tests/translation/README.md

Random weights (see `init_weights`): every Linear weight ~ N(0, (GAIN / sqrt(fan_in))^2),
biases ~ N(0, 0.1^2), LayerNorm/RMSNorm gamma ~ N(1, 0.1^2), LayerNorm beta ~ N(0, 0.1^2),
token embeddings ~ N(0, EMBED_STD^2), learned positions ~ N(0, POS_STD^2), cross-attention
output projections x CROSS_OUT; the end-of-sequence row of the output projection is zero (and
its final_logits_bias entry -1 for Marian) so EOS never wins and every run has its full length;
padding rows of BART-family embeddings stay zero (Marian decodes from the zero pad embedding).

Usage (torch, transformers, ctranslate2, tokenizers, safetensors, numpy):
    python3 tools/make_translation_golden.py            # all fixtures
    python3 tools/make_translation_golden.py marian t5
Checked with torch 2.15.0, transformers 5.23.0, ctranslate2 4.8.5.
The Rust tests never need Python: they read the committed fixtures.
"""

import copy
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch
from safetensors.numpy import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "translation")

MAX_NEW = 10

# Every family: d_model, heads, layers, ffn, vocabulary layout, init scales.
CONFIGS = {
    # OPUS-MT shape: SiLU ("swish"), scaled embeddings, sinusoidal positions, tied shared
    # vocabulary with <pad> last (decoder start = pad, as the HF conversion of Marian does).
    "marian": dict(family="marian", d_model=48, heads=3, ffn=96, vocab=301, seed=11,
                   gain=2.0, embed_std=3.0, pos_std=0.0, cross_out=0.3),
    # BART: post-LN, learned positions offset 2, layernorm_embedding, GELU; decoder start </s>,
    # forced BOS <s> (as facebook/bart-large-cnn).
    "bart": dict(family="bart", d_model=32, heads=4, ffn=64, vocab=263, seed=12,
                 gain=1.5, embed_std=1.0, pos_std=1.0, cross_out=0.3),
    # mBART-50: pre-LN + final norms + layernorm_embedding, GELU; source "[en_XX] ... </s>",
    # decoder start </s>, forced BOS = target language code.
    "mbart": dict(family="mbart", d_model=40, heads=5, ffn=80, vocab=290, seed=13,
                  gain=3.0, embed_std=0.3, pos_std=1.0, cross_out=0.3),
    # M2M100 / NLLB: sinusoidal positions with offset 2 and padding_idx, scaled embeddings,
    # pre-LN + final norms, ReLU; source "__en__ ... </s>", decoder start </s>, forced BOS
    # = target language code.
    "m2m100": dict(family="m2m100", d_model=48, heads=3, ffn=112, vocab=277, seed=14,
                   gain=3.0, embed_std=0.3, pos_std=0.0, cross_out=0.3),
    # BART whose stacks differ: the encoder's 4 heads and feed-forward width 48, the decoder's
    # 2 heads (self- and cross-attention) and width 80. No CTranslate2 directory: its converter
    # writes the encoder's heads for both stacks.
    "bart_stacks": dict(family="bart", d_model=32, heads=4, dec_heads=2, ffn=48, dec_ffn=80,
                        vocab=263, seed=17, gain=1.5, embed_std=1.0, pos_std=1.0,
                        cross_out=0.3, ct2=False),
    # BART whose feed-forward widths alone differ (48 and 80), which CTranslate2 converts.
    "bart_ffn": dict(family="bart", d_model=32, heads=4, ffn=48, dec_ffn=80, vocab=263,
                     seed=18, gain=1.5, embed_std=1.0, pos_std=1.0, cross_out=0.3),
    # T5 v1.1 / Flan: gated-gelu, RMSNorm, relative buckets (few buckets and a short max
    # distance so the logarithmic buckets are used at these lengths), untied lm_head.
    "t5": dict(family="t5", d_model=48, heads=3, d_kv=16, ffn=96, vocab=257, seed=15,
               ff="gated-gelu", tied=False, buckets=8, max_distance=12,
               gain=2.5, embed_std=1.0, rel_std=1.0, cross_out=0.3),
    # Classic T5: ReLU, tied embeddings (lm_head scaled by d_model^-0.5), default buckets.
    "t5_tied": dict(family="t5", d_model=32, heads=4, d_kv=8, ffn=64, vocab=250, seed=16,
                    ff="relu", tied=True, buckets=32, max_distance=128,
                    gain=2.5, embed_std=1.0, rel_std=1.0, cross_out=0.3),
}

# Families that also get 16-bit CTranslate2 directories: ct2_f16/ (float16), ct2_bf16/
# (bfloat16), with their references under the prefix `f16_` / `bf16_`.
HALF_FIXTURES = {"marian": ("float16",), "bart": ("float16", "bfloat16"), "t5": ("float16",)}
HALF_TYPES = {"float16": ("f16", torch.float16), "bfloat16": ("bf16", torch.bfloat16)}

LANGS = ["en", "de", "fr", "ro", "zh"]
MBART_LANGS = ["en_XX", "de_DE", "fr_XX", "ro_RO", "zh_CN"]


def vocabulary(c):
    """(tokens in id order, dict of special ids) for the family's layout."""
    fam, n = c["family"], c["vocab"]
    if fam == "marian":
        head, tail = ["</s>", "<unk>"], ["<pad>"]
    elif fam == "bart":
        head, tail = ["<s>", "<pad>", "</s>", "<unk>"], ["<mask>"]
    elif fam == "mbart":
        head, tail = ["<s>", "<pad>", "</s>", "<unk>"], MBART_LANGS + ["<mask>"]
    elif fam == "m2m100":
        head, tail = ["<s>", "<pad>", "</s>", "<unk>"], ["__%s__" % x for x in LANGS]
    else:
        head, tail = ["<pad>", "</s>", "<unk>"], []
    words = ["w%d" % i for i in range(n - len(head) - len(tail))]
    tokens = head + words + tail
    assert len(tokens) == n
    return tokens, {t: i for i, t in enumerate(tokens)}


def build_tokenizer(c, out_dir):
    """A word-level `tokenizers` model over `vocabulary(c)`, saved as PreTrainedTokenizerFast."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokens, ids = vocabulary(c)
    tok = Tokenizer(models.WordLevel(vocab=dict(ids), unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    specials = [t for t in tokens if not t.startswith("w")]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    fam = c["family"]
    kw = dict(eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    if fam in ("bart", "mbart", "m2m100"):
        kw["bos_token"] = "<s>"
    if fam == "mbart":
        kw["additional_special_tokens"] = MBART_LANGS
    if fam == "m2m100":
        kw["additional_special_tokens"] = ["__%s__" % x for x in LANGS]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kw)
    assert fast.convert_tokens_to_ids(tokens) == list(range(len(tokens)))
    fast.save_pretrained(out_dir)
    return fast


def make_model(c):
    from transformers import (BartConfig, BartForConditionalGeneration, GenerationConfig,
                              M2M100Config, M2M100ForConditionalGeneration, MarianConfig,
                              MarianMTModel, MBartConfig, MBartForConditionalGeneration,
                              T5Config, T5ForConditionalGeneration)

    fam = c["family"]
    tokens, ids = vocabulary(c)
    n = len(tokens)
    drop = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    common = dict(vocab_size=n, d_model=c["d_model"], encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=c["heads"],
                  decoder_attention_heads=c.get("dec_heads", c["heads"]),
                  encoder_ffn_dim=c["ffn"], decoder_ffn_dim=c.get("dec_ffn", c["ffn"]),
                  max_position_embeddings=64, **drop)
    gen = dict(max_length=64, num_beams=1, do_sample=False)
    if fam == "marian":
        pad, eos = ids["<pad>"], ids["</s>"]
        cfg = MarianConfig(activation_function="swish", scale_embedding=True,
                           share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
                           pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                           forced_eos_token_id=eos, **common)
        cls = MarianMTModel
        gen.update(decoder_start_token_id=pad, eos_token_id=eos, pad_token_id=pad,
                   forced_eos_token_id=eos, bad_words_ids=[[pad]])
    elif fam == "bart":
        cfg = BartConfig(activation_function="gelu", scale_embedding=False,
                         bos_token_id=0, pad_token_id=1, eos_token_id=2,
                         decoder_start_token_id=2, forced_bos_token_id=0,
                         forced_eos_token_id=2, normalize_before=False,
                         normalize_embedding=True, **common)
        cls = BartForConditionalGeneration
        gen.update(decoder_start_token_id=2, bos_token_id=0, eos_token_id=2, pad_token_id=1,
                   forced_bos_token_id=0, forced_eos_token_id=2)
    elif fam == "mbart":
        tgt = ids["de_DE"]
        cfg = MBartConfig(activation_function="gelu", scale_embedding=True,
                          bos_token_id=0, pad_token_id=1, eos_token_id=2,
                          decoder_start_token_id=2, forced_bos_token_id=tgt,
                          forced_eos_token_id=2, tokenizer_class="MBart50Tokenizer",
                          normalize_before=True, normalize_embedding=True, **common)
        cls = MBartForConditionalGeneration
        gen.update(decoder_start_token_id=2, bos_token_id=0, eos_token_id=2, pad_token_id=1,
                   forced_bos_token_id=tgt, forced_eos_token_id=2)
    elif fam == "m2m100":
        tgt = ids["__de__"]
        cfg = M2M100Config(activation_function="relu", scale_embedding=True,
                           bos_token_id=0, pad_token_id=1, eos_token_id=2,
                           decoder_start_token_id=2, forced_bos_token_id=tgt, **common)
        cls = M2M100ForConditionalGeneration
        gen.update(decoder_start_token_id=2, bos_token_id=0, eos_token_id=2, pad_token_id=1,
                   forced_bos_token_id=tgt)
    else:
        cfg = T5Config(vocab_size=n, d_model=c["d_model"], d_kv=c["d_kv"], d_ff=c["ffn"],
                       num_layers=2, num_decoder_layers=2, num_heads=c["heads"],
                       relative_attention_num_buckets=c["buckets"],
                       relative_attention_max_distance=c["max_distance"],
                       feed_forward_proj=c["ff"], tie_word_embeddings=c["tied"],
                       dropout_rate=0.0, layer_norm_epsilon=1e-6,
                       pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
        cls = T5ForConditionalGeneration
        gen.update(decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    torch.manual_seed(c["seed"])
    model = cls(cfg).eval()
    model.generation_config = GenerationConfig(**gen)
    init_weights(model, c, ids)
    return model, ids


def init_weights(model, c, ids):
    g = torch.Generator().manual_seed(c["seed"])
    fam = c["family"]

    def normal(t, std, mean=0.0):
        with torch.no_grad():
            t.copy_(mean + std * torch.randn(t.shape, generator=g, dtype=torch.float64))

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            normal(mod.weight, c["gain"] / np.sqrt(mod.in_features))
            if mod.bias is not None:
                normal(mod.bias, 0.1)
        elif isinstance(mod, torch.nn.LayerNorm):
            normal(mod.weight, 0.1, 1.0)
            normal(mod.bias, 0.1)
        elif type(mod).__name__ == "T5LayerNorm":
            normal(mod.weight, 0.1, 1.0)
    if fam == "t5":
        normal(model.shared.weight, c["embed_std"])
        for stack in (model.encoder, model.decoder):
            for block in stack.block:
                att = block.layer[0].SelfAttention
                with torch.no_grad():
                    # T5 has no 1/sqrt(d_kv) in attention; its init folds it into q.
                    att.q.weight /= np.sqrt(c["d_kv"])
                    if stack is model.decoder:
                        block.layer[1].EncDecAttention.q.weight /= np.sqrt(c["d_kv"])
                        block.layer[1].EncDecAttention.o.weight *= c["cross_out"]
                if att.has_relative_attention_bias:
                    normal(att.relative_attention_bias.weight, c["rel_std"])
        with torch.no_grad():
            model.lm_head.weight[ids["</s>"]] = 0.0
        return
    base = model.model
    normal(base.shared.weight, c["embed_std"])
    for part in (base.encoder, base.decoder):
        pos = part.embed_positions
        if c["pos_std"] > 0 and isinstance(pos, torch.nn.Embedding):
            normal(pos.weight, c["pos_std"])
    with torch.no_grad():
        base.shared.weight[ids["<pad>"]] = 0.0
        base.shared.weight[ids["</s>"]] = 0.0
        for layer in base.decoder.layers:
            layer.encoder_attn.out_proj.weight *= c["cross_out"]
    if fam == "marian":
        normal(model.final_logits_bias, c.get("bias_std", 0.1))
        with torch.no_grad():
            model.final_logits_bias[0, ids["</s>"]] = -1.0
    assert model.lm_head.weight.data_ptr() == base.shared.weight.data_ptr()


def source_and_forced(c, ids, rng):
    """(src_ids, decoder_input_ids, forced prefix for generation) as the family's tokenizer
    and generate() lay them out."""
    fam = c["family"]
    words = [ids["w%d" % i] for i in rng.integers(0, 200, 12)]
    eos = ids["</s>"]
    if fam == "marian" or fam == "t5":
        src = words[:8] + [eos]
    elif fam == "bart":
        src = [ids["<s>"]] + words[:7] + [eos]
    elif fam == "mbart":
        src = [ids["en_XX"]] + words[:7] + [eos]
    else:
        src = [ids["__en__"]] + words[:7] + [eos]
    start = {"marian": ids.get("<pad>"), "t5": ids.get("<pad>")}.get(fam, eos)
    forced_bos = {"bart": ids.get("<s>"), "mbart": ids.get("de_DE"),
                  "m2m100": ids.get("__de__")}.get(fam)
    prefix = [start] + ([forced_bos] if forced_bos is not None else [])
    tail = [ids["w%d" % i] for i in rng.integers(0, 200, 9 - len(prefix))]
    return src, prefix + tail, prefix


def hf_generate(model, src, beams):
    out = model.generate(input_ids=torch.tensor([src]), max_new_tokens=MAX_NEW, do_sample=False,
                         num_beams=beams, length_penalty=1.0, early_stopping=True,
                         repetition_penalty=1.0, no_repeat_ngram_size=0,
                         forced_eos_token_id=None)
    return [int(t) for t in out[0].tolist()]


def margin_along(model, src, seq, n_forced):
    """Smallest top-1 minus top-2 logit gap at the generated positions of seq."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([src]),
                       decoder_input_ids=torch.tensor([seq[:-1]])).logits[0]
    gaps = []
    for i in range(n_forced - 1, len(seq) - 1):
        top = torch.topk(logits[i], 2).values
        gaps.append(float(top[0] - top[1]))
    return min(gaps)


def ct2_translate(ct2_dir, tokens, src, prefix, beams):
    """translate_batch on token strings; returns ids with the decoder start prepended."""
    import ctranslate2

    tr = ctranslate2.Translator(ct2_dir, device="cpu", compute_type="float32")
    kw = {}
    if len(prefix) > 1:
        kw["target_prefix"] = [[tokens[t] for t in prefix[1:]]]
    res = tr.translate_batch([[tokens[t] for t in src]], beam_size=beams,
                             max_decoding_length=MAX_NEW, return_scores=True,
                             length_penalty=1.0, repetition_penalty=1.0,
                             no_repeat_ngram_size=0, **kw)
    index = {t: i for i, t in enumerate(tokens)}
    return [prefix[0]] + [index[t] for t in res[0].hypotheses[0]], float(res[0].scores[0])


def read_model_bin(path):
    """(spec, revision, [(name, dtype, shape)], [(alias, target)], {scalar f32 name: value}) of
    a CTranslate2 model.bin."""
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("H")
        text = data[pos:pos + n - 1].decode()
        pos += n
        return text

    (version,) = take("I")
    spec, (revision,) = string(), take("I")
    assert version >= 4, version
    dtypes = {0: "f32", 1: "i8", 2: "i16", 3: "i32", 4: "f16", 5: "bf16"}
    variables, scalars = [], {}
    for _ in range(take("I")[0]):
        name = string()
        (rank,) = take("B")
        shape = list(take("%dI" % rank)) if rank else []
        (dtype,) = take("B")
        (nbytes,) = take("I")
        if not shape and dtypes[dtype] == "f32":
            scalars[name] = struct.unpack_from("<f", data, pos)[0]
        pos += nbytes
        variables.append((name, dtypes[dtype], shape))
    aliases = [(string(), string()) for _ in range(take("I")[0])]
    return spec, revision, variables, aliases, scalars


def write_names(out):
    """names.txt: the HF state_dict keys and the CTranslate2 variables, with shapes."""
    from safetensors import safe_open

    lines = ["# hf/model.safetensors (float32)"]
    with safe_open(os.path.join(out, "hf", "model.safetensors"), "np") as f:
        for k in sorted(f.keys()):
            lines.append("%s %s" % (k, list(f.get_slice(k).get_shape())))
    model_bin = os.path.join(out, "ct2", "model.bin")
    if os.path.exists(model_bin):
        spec, rev, variables, aliases, _ = read_model_bin(model_bin)
        lines.append("# ct2/model.bin: spec %s revision %d" % (spec, rev))
        lines += ["%s %s %s" % (n, t, s) for n, t, s in variables]
        lines += ["alias %s -> %s" % a for a in aliases]
    with open(os.path.join(out, "names.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def output_scale(model, ct2_dir):
    """CTranslate2's `decoder/scale_outputs` over the decoder-output scale transformers applies
    (1 when neither scales)."""
    scalars = read_model_bin(os.path.join(ct2_dir, "model.bin"))[4]
    ct2 = scalars.get("decoder/scale_outputs", 1.0)
    hf = model.config.d_model ** -0.5 if getattr(model.config, "scale_decoder_outputs",
                                                   False) else 1.0
    return ct2 / hf


def build_ct2_expected(name, out, model64, ct2_tokens, src, forced, prefix, log64):
    """ct2_expected.safetensors (and the 16-bit directories of HALF_FIXTURES); returns stats
    entries."""
    import ctranslate2

    vocab = len(ct2_tokens)
    scale = output_scale(model64, os.path.join(out, "ct2"))
    tensors = {"logits": log64[:, :vocab] * scale, "output_scale": np.asarray([scale])}
    stats = {"ct2_output_scale": scale}
    for quantization in HALF_FIXTURES.get(name, ()):
        tag, dtype = HALF_TYPES[quantization]
        half_dir = os.path.join(out, "ct2_" + tag)
        ctranslate2.converters.TransformersConverter(os.path.join(out, "hf")).convert(
            half_dir, quantization=quantization, force=True)
        rounded = copy.deepcopy(model64).to(dtype).double()
        with torch.no_grad():
            logits = rounded(input_ids=torch.tensor([src]),
                             decoder_input_ids=torch.tensor([forced])).logits[0].numpy()
        greedy, _ = ct2_translate(half_dir, ct2_tokens, src, prefix, 1)
        beam, _ = ct2_translate(half_dir, ct2_tokens, src, prefix, 4)
        i64 = lambda xs: np.asarray(xs, dtype=np.int64)
        tensors.update({tag + "_logits": logits[:, :vocab] * scale,
                        tag + "_greedy_tokens": i64(greedy),
                        tag + "_beam4_tokens": i64(beam)})
        stats.update({
            "ct2_%s_greedy" % tag: greedy,
            "ct2_%s_beam4" % tag: beam,
            "%s_logits_minus_f32_max_abs" % tag: float(np.abs(logits - log64).max() * scale),
            "%s_greedy_margin" % tag: margin_along(rounded, src, greedy, len(prefix)) * scale,
        })
    save_file(tensors, os.path.join(out, "ct2_expected.safetensors"))
    return stats


def build(name, c):
    import ctranslate2

    out = os.path.join(ROOT, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    hf_dir, ct2_dir = os.path.join(out, "hf"), os.path.join(out, "ct2")
    os.makedirs(hf_dir)
    model, ids = make_model(c)
    model.save_pretrained(hf_dir, safe_serialization=True)
    build_tokenizer(c, hf_dir)
    with_ct2 = c.get("ct2", True)
    tokens, _ = vocabulary(c)
    ct2_tokens = tokens
    if with_ct2:
        ctranslate2.converters.TransformersConverter(hf_dir).convert(ct2_dir, quantization=None,
                                                                     force=True)
        with open(os.path.join(ct2_dir, "shared_vocabulary.json")) as f:
            ct2_tokens = json.load(f)

    rng = np.random.default_rng(c["seed"])
    src, forced, prefix = source_and_forced(c, ids, rng)
    src_t, dec_t = torch.tensor([src]), torch.tensor([forced])

    model32 = model.float()
    with torch.no_grad():
        enc32 = model32.get_encoder()(input_ids=src_t).last_hidden_state[0].numpy()
        log32 = model32(input_ids=src_t, decoder_input_ids=dec_t).logits[0].numpy()
    greedy32 = hf_generate(model32, src, 1)
    beam32 = hf_generate(model32, src, 4)

    model64 = model.double()
    with torch.no_grad():
        enc64 = model64.get_encoder()(input_ids=src_t).last_hidden_state[0].numpy()
        log64 = model64(input_ids=src_t, decoder_input_ids=dec_t).logits[0].numpy()
    greedy = hf_generate(model64, src, 1)
    beam = hf_generate(model64, src, 4)
    assert greedy[:len(prefix)] == prefix, (greedy, prefix)
    margin = margin_along(model64, src, greedy, len(prefix))

    i64 = lambda xs: np.asarray(xs, dtype=np.int64)
    expected = {
        "src_ids": i64(src),
        "decoder_input_ids": i64(forced),
        "logits": log64,
        "encoder_output": enc64,
        "greedy_tokens": i64(greedy),
        "beam4_tokens": i64(beam),
        "greedy_margin": np.asarray([margin], dtype=np.float64),
    }
    ct2_greedy = ct2_beam = ct2_greedy_score = ct2_beam_score = None
    if with_ct2:
        ct2_greedy, ct2_greedy_score = ct2_translate(ct2_dir, ct2_tokens, src, prefix, 1)
        ct2_beam, ct2_beam_score = ct2_translate(ct2_dir, ct2_tokens, src, prefix, 4)
        expected.update(ct2_greedy_tokens=i64(ct2_greedy), ct2_beam4_tokens=i64(ct2_beam))
    save_file(expected, os.path.join(out, "expected.safetensors"))

    gen = greedy[len(prefix):]
    stats = {
        "name": name,
        "vocab_size": model.config.vocab_size,
        "ct2_vocab_size": len(ct2_tokens),
        "src": src,
        "decoder_input_ids": forced,
        "greedy": greedy,
        "beam4": beam,
        "ct2_greedy": ct2_greedy,
        "ct2_beam4": ct2_beam,
        "ct2_greedy_score": ct2_greedy_score,
        "ct2_beam4_score": ct2_beam_score,
        "distinct_generated_greedy": len(set(gen)),
        "distinct_generated_beam4": len(set(beam[len(prefix):])),
        "greedy_margin": margin,
        "hf_f32_greedy_equal": greedy32 == greedy,
        "hf_f32_beam4_equal": beam32 == beam,
        "ct2_greedy_equal": ct2_greedy == greedy if with_ct2 else None,
        "ct2_beam4_equal": ct2_beam == beam if with_ct2 else None,
        "ct2_vocab_equal_hf_prefix": ct2_tokens == tokens[:len(ct2_tokens)],
        "encoder_scale": float(np.abs(enc64).max()),
        "encoder_f32_max_abs": float(np.abs(enc32 - enc64).max()),
        "logit_scale": float(np.abs(log64).max()),
        "logits_f32_max_abs": float(np.abs(log32 - log64).max()),
    }
    if with_ct2:
        stats.update(build_ct2_expected(name, out, model64, ct2_tokens, src, forced, prefix,
                                        log64))
    write_names(out)
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps({k: stats[k] for k in ("name", "greedy", "beam4", "ct2_greedy",
                                              "ct2_beam4", "distinct_generated_greedy",
                                              "greedy_margin", "logit_scale",
                                              "logits_f32_max_abs")}))
    return stats


def main():
    names = sys.argv[1:] or list(CONFIGS)
    for name in names:
        build(name, CONFIGS[name])


if __name__ == "__main__":
    main()
