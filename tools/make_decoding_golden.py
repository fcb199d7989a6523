#!/usr/bin/env python3
"""Builds the decoding-option and text-to-text golden fixtures in tests/decoding/.

Two small random-weight translation models with real tokenizers (the SentencePiece and
tokenizer.json fixtures of text/tests/fixtures, made by tools/make_text_golden.py):

  marian/  MarianMTModel (SiLU, scaled embeddings, sinusoids, final_logits_bias), tokenizer
           source.spm (spm/unigram.model), target.spm (spm/bpe.model), vocab.json (marian/)
  nllb/    M2M100ForConditionalGeneration (model_type m2m_100) with the NllbTokenizer
           tokenizer.json of nllb/ (SentencePiece BPE, 200 language codes)

Weights as tools/make_translation_golden.py draws them (its `init_weights`), except that the
end-of-sequence token can win here: its logit is raised (Marian's final_logits_bias, NLLB's
embedding row) so that sentences end after a few tokens, which min_length, length penalties
and n-best lists need. Each model directory holds config.json, model.safetensors,
generation_config.json and the tokenizer files (Marian's source.spm is not kept: it is
text/tests/fixtures/spm/unigram.model). The CTranslate2 conversion (float32) the script runs
is not kept either.

expected.json, per model:
  "pipeline": the Python pipeline, text to text: tokenizer(text) (src_lang set for NLLB), then
      model.generate(**inputs[, forced_bos_token_id=tgt_lang]) with the directory's
      generation_config.json (early_stopping: transformers' default, False), then
      tokenizer.decode(skip_special_tokens=True);
      per line: text, src_ids, generated ids (decoder start dropped), output text.
  "cases": decoding options on one source (or the case's own "src_ids"), each with the
      options, transformers' tokens and scores (float64 model; sequences_scores for beam search) and, where CTranslate2 has the
      same option, CTranslate2's tokens and scores (float32, translate_batch). Cases run with
      early_stopping=True unless they set it (the early_stopping_* cases: False and "never",
      which CTranslate2 does not have); "hf_steps": the decoder steps transformers ran (the
      length of its `scores`), which shows when its search stopped. The patience_* cases are
      CTranslate2's alone (transformers has no patience) and differ from patience 1.

Usage: python3 tools/make_decoding_golden.py   (torch, transformers, ctranslate2, tokenizers,
sentencepiece). Checked with torch 2.15.0, transformers 5.23.0, ctranslate2 4.8.5.
The Rust tests never need Python: they read the committed fixtures.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_translation_golden as mtg  # noqa: E402

EOS_SCALE = float(os.environ.get('EOS_SCALE', '2.2'))
ROOT = os.path.join(HERE, "..", "tests", "decoding")
TEXT = os.path.join(HERE, "..", "text", "tests", "fixtures")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world",
    "A small model translates a short sentence.",
]


def marian_dir(out):
    shutil.copy(os.path.join(TEXT, "spm", "unigram.model"), os.path.join(out, "source.spm"))
    shutil.copy(os.path.join(TEXT, "spm", "bpe.model"), os.path.join(out, "target.spm"))
    shutil.copy(os.path.join(TEXT, "marian", "vocab.json"), os.path.join(out, "vocab.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "MarianTokenizer", "model_max_length": 64,
                   "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "separate_vocabs": False}, f)


def nllb_dir(out):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TEXT, "nllb", name), os.path.join(out, name))


def build_model(name, out):
    from transformers import (AutoTokenizer, GenerationConfig, M2M100Config,
                              M2M100ForConditionalGeneration, MarianConfig, MarianMTModel)

    tok = AutoTokenizer.from_pretrained(out)
    n = len(tok)
    pad, eos = tok.pad_token_id, tok.eos_token_id
    drop = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    if name == "marian":
        c = dict(family="marian", d_model=32, heads=4, ffn=64, seed=21, gain=2.0,
                 embed_std=3.0, pos_std=0.0, cross_out=0.3)
        cfg = MarianConfig(vocab_size=n, d_model=32, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4,
                           encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                           activation_function="swish", scale_embedding=True,
                           share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
                           pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                           forced_eos_token_id=eos, **drop)
        gen = dict(decoder_start_token_id=pad, eos_token_id=eos, pad_token_id=pad,
                   forced_eos_token_id=eos, bad_words_ids=[[pad]], num_beams=4,
                   max_length=32)
        cls = MarianMTModel
    else:
        c = dict(family="m2m100", d_model=32, heads=4, ffn=64, seed=22, gain=3.0,
                 embed_std=0.3, pos_std=0.0, cross_out=0.3)
        cfg = M2M100Config(vocab_size=n, d_model=32, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4,
                           encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                           activation_function="relu", scale_embedding=True,
                           pad_token_id=pad, bos_token_id=tok.bos_token_id, eos_token_id=eos,
                           decoder_start_token_id=eos, tokenizer_class="NllbTokenizer", **drop)
        gen = dict(decoder_start_token_id=eos, bos_token_id=tok.bos_token_id,
                   eos_token_id=eos, pad_token_id=pad, num_beams=4, max_length=32)
        cls = M2M100ForConditionalGeneration
    torch.manual_seed(c["seed"])
    model = cls(cfg).eval()
    model.generation_config = GenerationConfig(**gen)
    ids = {"<pad>": pad, "</s>": eos}
    mtg.init_weights(model, c, ids)
    g = torch.Generator().manual_seed(c["seed"] + 100)
    with torch.no_grad():
        if name == "marian":
            model.final_logits_bias[0, eos] = 9.0
        else:
            row = torch.randn(32, generator=g, dtype=torch.float64)
            model.model.shared.weight[eos] = (EOS_SCALE * row).float()
    model.save_pretrained(out, safe_serialization=True)
    return model, tok


def strip(seq, start, pad, eos):
    """Generated ids: decoder start dropped, padding after EOS dropped."""
    seq = [int(t) for t in seq][1:]
    if eos in seq:
        seq = seq[:seq.index(eos) + 1]
    return [t for t in seq if t != pad] if start != pad else seq


def hf_run(model, src, opts, start, pad, eos):
    """(tokens of each returned sequence, scores) of transformers generate."""
    kw = dict(do_sample=False, early_stopping=opts.get("early_stopping", True),
              num_beams=opts.get("beam", 1),
              max_new_tokens=opts.get("max_new_tokens", 20), forced_eos_token_id=None,
              length_penalty=opts.get("length_penalty", 1.0),
              repetition_penalty=opts.get("repetition_penalty", 1.0),
              no_repeat_ngram_size=opts.get("no_repeat_ngram_size", 0),
              min_length=opts.get("min_length", 0),
              num_return_sequences=opts.get("num_hypotheses", 1),
              return_dict_in_generate=True, output_scores=True)
    for key in ("forced_bos_token_id", "forced_eos_token_id", "suppress_tokens",
                "renormalize_logits"):
        if key in opts:
            kw[key] = opts[key]
    if "bad_words" in opts:
        kw["bad_words_ids"] = opts["bad_words"] + model.generation_config.bad_words_ids \
            if model.generation_config.bad_words_ids else opts["bad_words"]
    if "prefix" in opts:
        # A decoder prompt: transformers forces no BOS after it and does not count it in
        # max_new_tokens, so both are done here; the prompt is returned with the sequence.
        forced = [kw.pop("forced_bos_token_id")] if "forced_bos_token_id" in kw else []
        kw["decoder_input_ids"] = torch.tensor([[start] + forced + opts["prefix"]])
        kw["max_new_tokens"] -= len(forced) + len(opts["prefix"])
    out = model.generate(input_ids=torch.tensor([src]), **kw)
    seqs = [strip(s, start, pad, eos) for s in out.sequences]
    if kw["num_beams"] > 1:
        scores = [float(x) for x in out.sequences_scores]
    else:
        scores = None
    # The decoder steps the search ran (one score row each): when it stopped.
    hf_run.steps = len(out.scores)
    return seqs, scores


def ct2_run(ct2_dir, tokens, src, opts):
    import ctranslate2

    tr = ctranslate2.Translator(ct2_dir, device="cpu", compute_type="float32")
    kw = dict(beam_size=opts.get("beam", 1), max_decoding_length=opts.get("max_new_tokens", 20),
              return_scores=True, length_penalty=opts.get("length_penalty", 1.0),
              repetition_penalty=opts.get("repetition_penalty", 1.0),
              no_repeat_ngram_size=opts.get("no_repeat_ngram_size", 0),
              min_decoding_length=max(opts.get("min_length", 0) - 1, 0),
              num_hypotheses=opts.get("num_hypotheses", 1), return_end_token=True,
              patience=opts.get("patience", 1.0))
    prefix = ([opts["forced_bos_token_id"]] if "forced_bos_token_id" in opts else []) \
        + opts.get("prefix", [])
    if prefix:
        kw["target_prefix"] = [[tokens[t] for t in prefix]]
    if "suppress_tokens" in opts:
        kw["suppress_sequences"] = [[tokens[t]] for t in opts["suppress_tokens"]]
    if "bad_words" in opts:
        kw["suppress_sequences"] = [[tokens[t] for t in w] for w in opts["bad_words"]]
    res = tr.translate_batch([[tokens[t] for t in src]], **kw)[0]
    index = {t: i for i, t in enumerate(tokens)}
    return ([[index[t] for t in h] for h in res.hypotheses], [float(s) for s in res.scores])


CASES = [
    ("greedy", dict()),
    ("beam4", dict(beam=4)),
    ("nbest4", dict(beam=4, num_hypotheses=4)),
    ("nbest4_lp0", dict(beam=4, num_hypotheses=4, length_penalty=0.0)),
    ("nbest4_lp2", dict(beam=4, num_hypotheses=4, length_penalty=2.0)),
    ("repetition_greedy", dict(repetition_penalty=1.8)),
    ("repetition_beam4", dict(beam=4, repetition_penalty=1.8)),
    ("no_repeat2_greedy", dict(no_repeat_ngram_size=2)),
    ("no_repeat2_beam4", dict(beam=4, no_repeat_ngram_size=2, num_hypotheses=2)),
    ("min_length_greedy", dict(min_length=12)),
    ("min_length_beam4", dict(beam=4, min_length=12)),
    ("prefix_greedy", dict(prefix="words:3")),
    ("prefix_beam4", dict(beam=4, prefix="words:2")),
    ("suppress_greedy", dict(suppress_tokens="greedy:2")),
    ("bad_words_beam4", dict(beam=4, bad_words="beam:2")),
    ("forced_eos", dict(max_new_tokens=3, forced_eos_token_id="eos")),
    ("max_new3_beam4", dict(beam=4, max_new_tokens=3)),
    # CTranslate2's `patience` (transformers has none): the search goes on until
    # round(beam · patience) hypotheses are registered. Each must differ from patience 1.
    ("patience2_nbest4", dict(beam=4, num_hypotheses=4, patience=2.0)),
    ("patience_half_beam3", dict(beam=3, patience=0.5)),
    # `renormalize_logits` (transformers only): rows back to log-probabilities after the
    # processors, which moves the beams' scores when a processor bans or penalises.
    ("renormalize_no_repeat2_beam4", dict(beam=4, num_hypotheses=4, no_repeat_ngram_size=2,
                                          renormalize_logits=True)),
    ("renormalize_repetition_beam4", dict(beam=4, num_hypotheses=4, repetition_penalty=1.8,
                                          renormalize_logits=True)),
] + [
    (f"early_stopping_{name}_lp{lp}", dict(beam=4, num_hypotheses=4, length_penalty=float(lp),
                                           early_stopping=value))
    for name, value in (("false", False), ("never", "never")) for lp in (0, 1, 2)
] + [
    # A source whose False search stops before the length limit with a length penalty of 1,
    # where "never" goes on to it.
    (f"early_stopping_{name}_lp1_station", dict(beam=4, num_hypotheses=4, early_stopping=value,
                                                text="Where is the station?"))
    for name, value in (("false", False), ("never", "never"))
]


def resolve(opts, greedy, beam, eos, words):
    """Turns the placeholders of CASES into ids taken from the plain runs."""
    out = dict(opts)
    for key, value in opts.items():
        if not isinstance(value, str):
            continue
        kind, _, n = value.partition(":")
        if kind == "eos":
            out[key] = eos
        elif kind == "words":
            out[key] = words[:int(n)]
        elif kind == "greedy":
            forced = opts.get("forced_bos_token_id")
            out[key] = [t for t in greedy if t not in (eos, forced)][:int(n)]
        elif kind == "beam":
            toks = [t for t in beam if t != eos]
            out[key] = [toks[:int(n)]]
    return out


def build(name):
    import ctranslate2
    from transformers import GenerationConfig

    out = os.path.join(ROOT, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    hf_dir = os.path.join(out, "hf")
    os.makedirs(hf_dir)
    (marian_dir if name == "marian" else nllb_dir)(hf_dir)
    model, tok = build_model(name, hf_dir)
    ct2_dir = os.path.join(out, "ct2")
    ctranslate2.converters.TransformersConverter(hf_dir).convert(ct2_dir, quantization=None,
                                                                 force=True)
    with open(os.path.join(ct2_dir, "shared_vocabulary.json")) as f:
        ct2_tokens = json.load(f)
    model = model.double()
    start = model.generation_config.decoder_start_token_id
    pad, eos = tok.pad_token_id, tok.eos_token_id
    lang = {}
    if name == "nllb":
        tok.src_lang = "eng_Latn"
        lang = {"src_lang": "eng_Latn", "tgt_lang": "fra_Latn"}

    # Text to text as the Python pipeline runs it.
    pipeline = []
    gen = GenerationConfig.from_pretrained(hf_dir)
    for text in SENTENCES:
        src = tok(text)["input_ids"]
        kw = {}
        if name == "nllb":
            kw["forced_bos_token_id"] = tok.convert_tokens_to_ids("fra_Latn")
        seq = model.generate(input_ids=torch.tensor([src]), generation_config=gen, **kw)[0]
        ids = [int(t) for t in seq][1:]
        pipeline.append({"text": text, "src_ids": src, "generated": ids,
                         "output": tok.decode(seq, skip_special_tokens=True)})

    # Decoding options on one source.
    src = tok(SENTENCES[0])["input_ids"]
    base = {"forced_bos_token_id": tok.convert_tokens_to_ids("fra_Latn")} if name == "nllb" else {}
    plain, _ = hf_run(model, src, dict(base), start, pad, eos)
    plain_beam, _ = hf_run(model, src, dict(base, beam=4), start, pad, eos)
    words = [t for t in plain[0] if t not in (eos, base.get("forced_bos_token_id"))]
    rng = np.random.default_rng(5)
    words = [int(t) for t in rng.permutation(words)] + [int(t) for t in rng.integers(4, 200, 3)]
    cases = []
    for case, opts in CASES:
        opts = resolve(dict(base, **opts), plain[0], plain_beam[0], eos, words)
        text = opts.pop("text", None)
        case_src = tok(text)["input_ids"] if text else src
        entry = {"name": case, "options": opts}
        if "patience" not in opts:
            hf_tokens, hf_scores = hf_run(model, case_src, opts, start, pad, eos)
            entry.update(hf_tokens=hf_tokens, hf_scores=hf_scores, hf_steps=hf_run.steps)
        if text:
            entry["src_ids"] = case_src
        if not {"forced_eos_token_id", "early_stopping", "renormalize_logits"} & set(opts):
            ct2_t, ct2_s = ct2_run(ct2_dir, ct2_tokens, src, opts)
            entry["ct2_tokens"], entry["ct2_scores"] = ct2_t, ct2_s
            if "patience" in opts:
                # Patience changes a search only where hypotheses end before the length limit:
                # NLLB's fixture (Marian's, under CTranslate2, runs them to the limit).
                plain = ct2_run(ct2_dir, ct2_tokens, src, dict(opts, patience=1.0))
                assert name != "nllb" or plain != (ct2_t, ct2_s), (name, case, "patience")
            else:
                entry["ct2_equal_hf"] = ct2_t == hf_tokens
        cases.append(entry)
        print(name, case, "hf", entry.get("hf_tokens", [])[:2], "ct2", entry.get("ct2_tokens", [])[:2])
    expected = {"src_ids": src, "decoder_start": start, "eos": eos, "languages": lang,
                "pipeline": pipeline, "cases": cases}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    for p in pipeline:
        print(name, json.dumps(p))
    # Not committed: ct2/ (the CTranslate2 results are in expected.json) and Marian's
    # source.spm, a copy of text/tests/fixtures/spm/unigram.model that the tests copy in.
    shutil.rmtree(ct2_dir)
    if name == "marian":
        os.remove(os.path.join(hf_dir, "source.spm"))


def main():
    for name in sys.argv[1:] or ["marian", "nllb"]:
        build(name)


if __name__ == "__main__":
    main()
