#!/usr/bin/env python3
"""Builds tests/published/<row>/: checkpoints in the layouts *and dimensions* of published
models, with random weights that the Rust tests regenerate instead of reading a committed file.

For each row of ROWS: the published `config.json` (every field as published, the layer counts
cut to 2 per stack) and `generation_config.json`; the model built from them by `transformers`'
own class; every parameter and buffer drawn from the shared generator (tools/published_weights.py,
mirrored by tests/src/published.rs) at the scales of INIT; the directory `save_pretrained` writes.
Committed per row:

  config.json, generation_config.json   as the published checkpoint has them (layers cut)
  manifest.json   every tensor of model.safetensors in file order: name, shape, the generator
                  name it was drawn under (tied tensors share one), offset, scale, rows set to
                  zero, single entries set, and `sum` (the float64 sum of its float32 values, a
                  check that both generators agree)
  expected.json   src_ids, decoder_input_ids, the teacher-forced logits of `from_pretrained`
                  in float64 at 256 columns a step (the 32 largest and 224 drawn ones) with the
                  largest magnitude over every logit, greedy and beam-4 tokens of `generate`
                  in float64 (10 new tokens, the decoder start first), the smallest top-1 gap

The end-of-sequence row of the output projection is zero (so every search runs its full
length) and padding rows of the embeddings are zero, as in tools/make_translation_golden.py.

The T5 v1.1-family rows (`untied_head`: t5-v1_1-small, flan-t5-small, flan-t5-base,
mt5-small) store their own `lm_head.weight`, as the published files do (`tie_word_embeddings:
false`). transformers 5 forces T5's tie, so `save_pretrained` writes none: the script adds it
to the saved file, drawn under its own generator name (`head_gen`), and `from_pretrained` then
leaves it untied (a stored head that differs from `shared`), as it loads the published files;
the script checks that it does. expected.json then also holds `tied_head_distance`: how far
the same weights projected with `shared` land from the reference at the checked columns, as a
fraction of the scale (the Rust test requires it far above its bound).
Before writing, the script regenerates every tensor from the manifest and checks it equals
the saved file bit for bit.

Usage: python3 tools/make_published_golden.py [row ...]   (torch, transformers, safetensors,
numpy; checked with torch 2.15.0, transformers 5.24.0). Needs about 4x the largest row's
float32 size in memory. The Rust tests never need Python.
"""

import json
import os
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published_weights as gen  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "published")
SEED = 20261127
MAX_NEW = 10
SAMPLED = 224
TOP = 32


def whisper_2022(name, d_model, heads, ffn):
    """A row of the multilingual Whisper checkpoints published in 2022 (base, small, medium,
    large-v2): one config.json and generation_config.json layout, their widths apart; the
    layer counts cut to 2 per stack."""
    return dict(
        config={
            "_name_or_path": name, "activation_dropout": 0.0,
            "activation_function": "gelu", "architectures": ["WhisperForConditionalGeneration"],
            "attention_dropout": 0.0, "begin_suppress_tokens": [220, 50257],
            "bos_token_id": 50257, "d_model": d_model, "decoder_attention_heads": heads,
            "decoder_ffn_dim": ffn, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 50258, "dropout": 0.0, "encoder_attention_heads": heads,
            "encoder_ffn_dim": ffn, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 50257, "forced_decoder_ids": [[1, 50259], [2, 50359], [3, 50363]],
            "init_std": 0.02, "is_encoder_decoder": True, "max_length": 448,
            "max_source_positions": 1500, "max_target_positions": 448, "model_type": "whisper",
            "num_hidden_layers": 2, "num_mel_bins": 80, "pad_token_id": 50257,
            "scale_embedding": False, "torch_dtype": "float32",
            "transformers_version": "4.27.0.dev0", "use_cache": True, "vocab_size": 51865},
        generation={"begin_suppress_tokens": [220, 50257], "bos_token_id": 50257,
                    "decoder_start_token_id": 50258, "eos_token_id": 50257,
                    "is_multilingual": True, "max_initial_timestamp_index": 50,
                    "max_length": 448, "no_timestamps_token_id": 50363, "pad_token_id": 50257,
                    "return_timestamps": False, "task_to_id": {"transcribe": 50359,
                                                               "translate": 50358},
                    "transformers_version": "4.31.0.dev0"},
        prompt=[50258, 50259, 50359, 50363], eos=50257, pad=50257, mel=1.0, gain=2.0,
        embed=0.5, pos=2.0, cross_out=0.1)


def longt5_base(attention, src_len, seed):
    """google/long-t5-local-base and -tglobal-base: one layout (T5 v1.1's widths, 127 keys a
    side, global blocks of 16) but for the encoder's attention; a source of `src_len` tokens
    and the end of sequence."""
    return dict(
        config={
            "architectures": ["LongT5ForConditionalGeneration"], "d_ff": 2048, "d_kv": 64,
            "d_model": 768, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new",
            "dropout_rate": 0.1, "encoder_attention_type": attention, "eos_token_id": 1,
            "feed_forward_proj": "gated-gelu", "global_block_size": 16,
            "initializer_factor": 1.0, "is_encoder_decoder": True, "is_gated_act": True,
            "layer_norm_epsilon": 1e-06, "local_radius": 127, "model_type": "longt5",
            "n_positions": 4096, "num_decoder_layers": 2, "num_heads": 12, "num_layers": 2,
            "output_past": True, "pad_token_id": 0, "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32, "tie_word_embeddings": False,
            "torch_dtype": "float32", "transformers_version": "4.20.0.dev0", "use_cache": True,
            "vocab_size": 32128},
        generation={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=2.5, embed=1.0,
        cross_out=0.3, rel=1.0, head=1.0, untied_head=True, seed=seed, src_len=src_len)


# pegasus-large's `task_specific_params`: (task, length_penalty, max_length, max_position_embeddings).
PEGASUS_TASKS = [
    ("summarization_aeslc", 0.6, 32, 512),
    ("summarization_arxiv", 0.8, 256, 1024),
    ("summarization_big_patent", 0.7, 256, 1024),
    ("summarization_billsum", 0.6, 256, 1024),
    ("summarization_cnn_dailymail", 0.8, 128, 1024),
    ("summarization_gigaword", 0.6, 32, 128),
    ("summarization_large", 0.8, 256, 1024),
    ("summarization_multi_news", 0.8, 256, 1024),
    ("summarization_newsroom", 0.8, 128, 512),
    ("summarization_pubmed", 0.8, 256, 1024),
    ("summarization_reddit_tifu", 0.6, 128, 512),
    ("summarization_wikihow", 0.6, 256, 512),
    ("summarization_xsum", 0.8, 64, 512),
]


# The published config.json of each checkpoint, layer counts cut to 2 per stack; the decoding
# prompt (decoder start, then the forced BOS a user passes: the target language) and source
# (source language code first where the tokenizer puts it), and the init gains.
ROWS = {
    "opus-mt-en-de": dict(
        config={
            "_name_or_path": "Helsinki-NLP/opus-mt-en-de", "activation_dropout": 0.0,
            "activation_function": "swish", "add_bias_logits": False, "add_final_layer_norm": False,
            "architectures": ["MarianMTModel"], "attention_dropout": 0.0, "bad_words_ids": [[58100]],
            "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": 512,
            "decoder_attention_heads": 8, "decoder_ffn_dim": 2048, "decoder_layerdrop": 0.0,
            "decoder_layers": 2, "decoder_start_token_id": 58100, "decoder_vocab_size": 58101,
            "dropout": 0.1, "encoder_attention_heads": 8, "encoder_ffn_dim": 2048,
            "encoder_layerdrop": 0.0, "encoder_layers": 2, "eos_token_id": 0,
            "forced_eos_token_id": 0, "init_std": 0.02, "is_encoder_decoder": True,
            "max_length": 512, "max_position_embeddings": 512, "model_type": "marian",
            "normalize_before": False, "normalize_embedding": False, "num_beams": 4,
            "num_hidden_layers": 2, "pad_token_id": 58100, "scale_embedding": True,
            "share_encoder_decoder_embeddings": True, "static_position_embeddings": True,
            "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 58101},
        generation={"bad_words_ids": [[58100]], "bos_token_id": 0, "decoder_start_token_id": 58100,
                    "eos_token_id": 0, "forced_eos_token_id": 0, "max_length": 512,
                    "num_beams": 4, "pad_token_id": 58100, "renormalize_logits": True,
                    "transformers_version": "4.34.0.dev0"},
        src_prefix=[], eos=0, pad=58100, start=58100, forced=None, gain=4.0, embed=0.3, seed=4,
        cross_out=0.1),
    "nllb-200-distilled-600M": dict(
        config={
            "_name_or_path": "facebook/nllb-200-distilled-600M", "activation_dropout": 0.0,
            "activation_function": "relu", "architectures": ["M2M100ForConditionalGeneration"],
            "attention_dropout": 0.1, "bos_token_id": 0, "d_model": 1024,
            "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layerdrop": 0,
            "decoder_layers": 2, "decoder_start_token_id": 2, "dropout": 0.1,
            "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0,
            "encoder_layers": 2, "eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": True,
            "max_length": 200, "max_position_embeddings": 1024, "model_type": "m2m_100",
            "num_hidden_layers": 2, "pad_token_id": 1, "scale_embedding": True,
            "tokenizer_class": "NllbTokenizer", "torch_dtype": "float32",
            "transformers_version": "4.21.0.dev0", "use_cache": True, "vocab_size": 256206},
        generation={"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2,
                    "max_length": 200, "pad_token_id": 1, "transformers_version": "4.21.0.dev0"},
        # eng_Latn 256047 first; fra_Latn 256057 forced.
        src_prefix=[256047], eos=2, pad=1, start=2, forced=256057, gain=6.0, embed=0.05,
        cross_out=0.3),
    "mt5-small": dict(
        config={
            "_name_or_path": "/home/patrick/hugging_face/t5/mt5-small",
            "architectures": ["MT5ForConditionalGeneration"], "d_ff": 1024, "d_kv": 64,
            "d_model": 512, "decoder_start_token_id": 0, "dropout_rate": 0.1,
            "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
            "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "mt5",
            "num_decoder_layers": 2, "num_heads": 6, "num_layers": 2, "pad_token_id": 0,
            "relative_attention_num_buckets": 32, "tie_word_embeddings": False,
            "tokenizer_class": "T5Tokenizer", "transformers_version": "4.10.0.dev0",
            "use_cache": True, "vocab_size": 250112},
        generation={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=2.5, embed=1.0,
        cross_out=0.3, rel=1.0, head=1.0, untied_head=True),
    "flan-t5-small": dict(
        config={
            "architectures": ["T5ForConditionalGeneration"], "d_ff": 1024, "d_kv": 64,
            "d_model": 512, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new",
            "dropout_rate": 0.1, "eos_token_id": 1, "feed_forward_proj": "gated-gelu",
            "initializer_factor": 1.0, "is_encoder_decoder": True, "is_gated_act": True,
            "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
            "num_decoder_layers": 2, "num_heads": 6, "num_layers": 2, "output_past": True,
            "pad_token_id": 0, "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32, "task_specific_params": {},
            "tie_word_embeddings": False, "transformers_version": "4.23.1", "use_cache": True,
            "vocab_size": 32128},
        generation={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=2.5, embed=1.0,
        cross_out=0.3, rel=1.0, head=1.0, untied_head=True, head_gen="lm_head.weight#1",
        copies=[("encoder.embed_tokens.weight", "shared.weight"),
                ("decoder.embed_tokens.weight", "shared.weight")]),
    "t5-small": dict(
        config={
            "architectures": ["T5WithLMHeadModel"], "d_ff": 2048, "d_kv": 64, "d_model": 512,
            "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1,
            "initializer_factor": 1.0, "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06,
            "model_type": "t5", "n_positions": 512, "num_heads": 8, "num_layers": 2,
            "output_past": True, "pad_token_id": 0, "relative_attention_num_buckets": 32,
            "task_specific_params": {
                "summarization": {"early_stopping": True, "length_penalty": 2.0,
                                  "max_length": 200, "min_length": 30,
                                  "no_repeat_ngram_size": 3, "num_beams": 4,
                                  "prefix": "summarize: "},
                "translation_en_to_de": {"early_stopping": True, "max_length": 300,
                                         "num_beams": 4,
                                         "prefix": "translate English to German: "},
                "translation_en_to_fr": {"early_stopping": True, "max_length": 300,
                                         "num_beams": 4,
                                         "prefix": "translate English to French: "},
                "translation_en_to_ro": {"early_stopping": True, "max_length": 300,
                                         "num_beams": 4,
                                         "prefix": "translate English to Romanian: "}},
            "vocab_size": 32128},
        generation={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=4.0, embed=0.05,
        cross_out=0.3, rel=1.0, head=1.0),
    "bart-large-cnn": dict(
        config={
            "_num_labels": 3, "activation_dropout": 0.0, "activation_function": "gelu",
            "add_final_layer_norm": False, "architectures": ["BartForConditionalGeneration"],
            "attention_dropout": 0.0, "bos_token_id": 0, "classif_dropout": 0.0,
            "classifier_dropout": 0.0, "d_model": 1024, "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 2, "dropout": 0.1, "early_stopping": True,
            "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0,
            "encoder_layers": 2, "eos_token_id": 2, "force_bos_token_to_be_generated": True,
            "forced_bos_token_id": 0, "forced_eos_token_id": 2, "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "init_std": 0.02,
            "is_encoder_decoder": True, "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "length_penalty": 2.0, "max_length": 142, "max_position_embeddings": 1024,
            "min_length": 56, "model_type": "bart", "no_repeat_ngram_size": 3,
            "normalize_before": False, "num_beams": 4, "num_hidden_layers": 2,
            "output_past": True, "pad_token_id": 1, "prefix": " ", "scale_embedding": False,
            "task_specific_params": {"summarization": {
                "early_stopping": True, "length_penalty": 2.0, "max_length": 142,
                "min_length": 56, "no_repeat_ngram_size": 3, "num_beams": 4}},
            "transformers_version": "4.7.0.dev0", "use_cache": True, "vocab_size": 50264},
        generation={"bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True,
                    "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2,
                    "length_penalty": 2.0, "max_length": 142, "min_length": 56,
                    "no_repeat_ngram_size": 3, "num_beams": 4, "pad_token_id": 1,
                    "transformers_version": "4.27.0.dev0"},
        # <s> first; the forced BOS <s>.
        src_prefix=[0], eos=2, pad=1, start=2, forced=0, gain=3.0, embed=1.0, cross_out=0.1,
        seed=3),
    "whisper-tiny": dict(
        config={
            "_name_or_path": "openai/whisper-tiny", "activation_dropout": 0.0,
            "activation_function": "gelu", "architectures": ["WhisperForConditionalGeneration"],
            "attention_dropout": 0.0, "begin_suppress_tokens": [220, 50257],
            "bos_token_id": 50257, "d_model": 384, "decoder_attention_heads": 6,
            "decoder_ffn_dim": 1536, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 50258, "dropout": 0.0, "encoder_attention_heads": 6,
            "encoder_ffn_dim": 1536, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 50257, "forced_decoder_ids": [[1, 50259], [2, 50359], [3, 50363]],
            "init_std": 0.02, "is_encoder_decoder": True, "max_length": 448,
            "max_source_positions": 1500, "max_target_positions": 448, "model_type": "whisper",
            "num_hidden_layers": 2, "num_mel_bins": 80, "pad_token_id": 50257,
            "scale_embedding": False, "torch_dtype": "float32",
            "transformers_version": "4.27.0.dev0", "use_cache": True, "vocab_size": 51865},
        generation={"begin_suppress_tokens": [220, 50257], "bos_token_id": 50257,
                    "decoder_start_token_id": 50258, "eos_token_id": 50257,
                    "is_multilingual": True, "max_initial_timestamp_index": 50,
                    "max_length": 448, "no_timestamps_token_id": 50363, "pad_token_id": 50257,
                    "return_timestamps": False, "task_to_id": {"transcribe": 50359,
                                                               "translate": 50358},
                    "transformers_version": "4.31.0.dev0"},
        # <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>
        prompt=[50258, 50259, 50359, 50363], eos=50257, pad=50257, mel=1.0, gain=2.0,
        embed=0.5, pos=2.0, cross_out=0.1),
    "whisper-large-v3": dict(
        config={
            "_name_or_path": "openai/whisper-large-v3", "activation_dropout": 0.0,
            "activation_function": "gelu", "apply_spec_augment": False,
            "architectures": ["WhisperForConditionalGeneration"], "attention_dropout": 0.0,
            "begin_suppress_tokens": [220, 50257], "bos_token_id": 50257,
            "classifier_proj_size": 256, "d_model": 1280, "decoder_attention_heads": 20,
            "decoder_ffn_dim": 5120, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 50258, "dropout": 0.0, "encoder_attention_heads": 20,
            "encoder_ffn_dim": 5120, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 50257, "init_std": 0.02, "is_encoder_decoder": True,
            "mask_feature_length": 10, "mask_feature_min_masks": 0, "mask_feature_prob": 0.0,
            "mask_time_length": 10, "mask_time_min_masks": 2, "mask_time_prob": 0.05,
            "max_length": 448, "max_source_positions": 1500, "max_target_positions": 448,
            "median_filter_width": 7, "model_type": "whisper", "num_hidden_layers": 2,
            "num_mel_bins": 128, "pad_token_id": 50256, "scale_embedding": False,
            "torch_dtype": "float16", "transformers_version": "4.36.0.dev0", "use_cache": True,
            "use_weighted_layer_sum": False, "vocab_size": 51866},
        generation={"begin_suppress_tokens": [220, 50257], "bos_token_id": 50257,
                    "decoder_start_token_id": 50258, "eos_token_id": 50257,
                    "is_multilingual": True, "max_initial_timestamp_index": 50,
                    "max_length": 448, "no_timestamps_token_id": 50364, "pad_token_id": 50257,
                    "prev_sot_token_id": 50362, "return_timestamps": False,
                    "task_to_id": {"transcribe": 50360, "translate": 50359},
                    "transformers_version": "4.37.0.dev0"},
        prompt=[50258, 50259, 50360, 50364], eos=50257, pad=50256, mel=1.0, gain=2.0,
        embed=0.5, pos=2.0, cross_out=0.1),
    "mbart-large-50-many-to-many-mmt": dict(
        config={
            "_name_or_path": "/home/suraj/projects/mbart-50/hf_models/mbart-50-large-many-to-many",
            "_num_labels": 3, "activation_dropout": 0.0, "activation_function": "relu",
            "add_bias_logits": False, "add_final_layer_norm": True,
            "architectures": ["MBartForConditionalGeneration"], "attention_dropout": 0.0,
            "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0,
            "d_model": 1024, "decoder_attention_heads": 16, "decoder_ffn_dim": 4096,
            "decoder_layerdrop": 0.0, "decoder_layers": 2, "decoder_start_token_id": 2,
            "dropout": 0.1, "early_stopping": True, "encoder_attention_heads": 16,
            "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 2, "forced_eos_token_id": 2, "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "init_std": 0.02,
            "is_encoder_decoder": True, "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "max_length": 200, "max_position_embeddings": 1024, "model_type": "mbart",
            "normalize_before": True, "normalize_embedding": True, "num_beams": 5,
            "num_hidden_layers": 2, "output_past": True, "pad_token_id": 1,
            "scale_embedding": True, "static_position_embeddings": False,
            "tokenizer_class": "MBart50Tokenizer", "transformers_version": "4.4.0.dev0",
            "use_cache": True, "vocab_size": 250054},
        generation={"bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True,
                    "eos_token_id": 2, "forced_eos_token_id": 2, "max_length": 200,
                    "num_beams": 5, "pad_token_id": 1, "transformers_version": "4.27.0.dev0"},
        # en_XX 250004 first; de_DE 250003 forced.
        src_prefix=[250004], eos=2, pad=1, start=2, forced=250003, gain=6.0, embed=0.05,
        cross_out=0.3),
    "pegasus-large": dict(
        config={
            "_name_or_path": "google/pegasus-large", "activation_dropout": 0.1,
            "activation_function": "relu", "add_bias_logits": False,
            "add_final_layer_norm": True, "architectures": ["PegasusForConditionalGeneration"],
            "attention_dropout": 0.1, "bos_token_id": 0, "classif_dropout": 0.0,
            "classifier_dropout": 0.0, "d_model": 1024, "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 0, "dropout": 0.1, "encoder_attention_heads": 16,
            "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 1, "extra_pos_embeddings": 1, "force_bos_token_to_be_generated": False,
            "forced_eos_token_id": 1, "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "init_std": 0.02,
            "is_encoder_decoder": True, "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "length_penalty": 0.8, "max_length": 256, "max_position_embeddings": 1024,
            "model_type": "pegasus", "normalize_before": True, "normalize_embedding": False,
            "num_beams": 8, "num_hidden_layers": 2, "pad_token_id": 0, "scale_embedding": True,
            "static_position_embeddings": True,
            "task_specific_params": {k: {"length_penalty": lp, "max_length": ml,
                                         "max_position_embeddings": mp}
                                     for k, lp, ml, mp in PEGASUS_TASKS},
            "transformers_version": "4.11.0.dev0", "use_cache": False, "vocab_size": 96103},
        # Written by `transformers` from the model config (no published file found).
        generation={"bos_token_id": 0, "decoder_start_token_id": 0, "eos_token_id": 1,
                    "forced_eos_token_id": 1, "length_penalty": 0.8, "max_length": 256,
                    "num_beams": 8, "pad_token_id": 0, "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=4.0, embed=0.05,
        cross_out=0.3, pos=0.3, stored_sinusoids=True, seed=5),
    "whisper-tiny.en": dict(
        config={
            "_name_or_path": "openai/whisper-tiny.en", "activation_dropout": 0.0,
            "activation_function": "gelu", "architectures": ["WhisperForConditionalGeneration"],
            "attention_dropout": 0.0, "begin_suppress_tokens": [220, 50256],
            "bos_token_id": 50257, "d_model": 384, "decoder_attention_heads": 6,
            "decoder_ffn_dim": 1536, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 50257, "dropout": 0.0, "encoder_attention_heads": 6,
            "encoder_ffn_dim": 1536, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 50256, "forced_decoder_ids": [[1, 50362]], "init_std": 0.02,
            "is_encoder_decoder": True, "max_length": 448, "max_source_positions": 1500,
            "max_target_positions": 448, "model_type": "whisper", "num_hidden_layers": 2,
            "num_mel_bins": 80, "pad_token_id": 50256, "scale_embedding": False,
            "torch_dtype": "float32", "transformers_version": "4.27.0.dev0", "use_cache": True,
            "vocab_size": 51864},
        generation={"begin_suppress_tokens": [220, 50256], "bos_token_id": 50257,
                    "decoder_start_token_id": 50257, "eos_token_id": 50256,
                    "is_multilingual": False, "max_initial_timestamp_index": 50,
                    "max_length": 448, "no_timestamps_token_id": 50362, "pad_token_id": 50256,
                    "return_timestamps": False, "transformers_version": "4.31.0.dev0"},
        # <|startoftranscript|> <|notimestamps|>
        prompt=[50257, 50362], eos=50256, pad=50256, mel=1.0, gain=2.0, embed=0.5, pos=2.0,
        cross_out=0.1),
    "m2m100_418M": dict(
        config={
            "activation_dropout": 0.0, "activation_function": "relu",
            "architectures": ["M2M100ForConditionalGeneration"], "attention_dropout": 0.1,
            "bos_token_id": 0, "d_model": 1024, "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.05, "decoder_layers": 2,
            "decoder_start_token_id": 2, "dropout": 0.1, "early_stopping": True,
            "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.05,
            "encoder_layers": 2, "eos_token_id": 2, "gradient_checkpointing": False,
            "init_std": 0.02, "is_encoder_decoder": True, "max_length": 200,
            "max_position_embeddings": 1024, "model_type": "m2m_100", "num_beams": 5,
            "num_hidden_layers": 2, "pad_token_id": 1, "scale_embedding": True,
            "transformers_version": "4.4.0.dev0", "use_cache": True, "vocab_size": 128112},
        generation={"bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True,
                    "eos_token_id": 2, "max_length": 200, "num_beams": 5, "pad_token_id": 1,
                    "transformers_version": "4.27.0.dev0"},
        # __en__ 128022 first; __fr__ 128028 forced.
        src_prefix=[128022], eos=2, pad=1, start=2, forced=128028, gain=6.0, embed=0.08,
        cross_out=0.3, seed=5),
    "opus-mt-tc-big-en-fr": dict(
        config={
            "_name_or_path": "/tmp/Helsinki-NLP/opus-mt-tc-big-en-fr", "activation_dropout": 0.0,
            "activation_function": "relu", "architectures": ["MarianMTModel"],
            "attention_dropout": 0.0, "bad_words_ids": [[53016]], "bos_token_id": 0,
            "classifier_dropout": 0.0, "d_model": 1024, "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 53016, "decoder_vocab_size": 53017, "dropout": 0.1,
            "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0,
            "encoder_layers": 2, "eos_token_id": 43311, "forced_eos_token_id": 43311,
            "init_std": 0.02, "is_encoder_decoder": True, "max_length": 512,
            "max_position_embeddings": 1024, "model_type": "marian",
            "normalize_embedding": False, "num_beams": 4, "num_hidden_layers": 2,
            "pad_token_id": 53016, "scale_embedding": True,
            "share_encoder_decoder_embeddings": True, "static_position_embeddings": True,
            "torch_dtype": "float16", "transformers_version": "4.22.0.dev0", "use_cache": True,
            "vocab_size": 53017},
        generation={"bad_words_ids": [[53016]], "bos_token_id": 0,
                    "decoder_start_token_id": 53016, "eos_token_id": 43311,
                    "forced_eos_token_id": 43311, "max_length": 512, "num_beams": 4,
                    "pad_token_id": 53016, "renormalize_logits": True,
                    "transformers_version": "4.32.0.dev0"},
        src_prefix=[], eos=43311, pad=53016, start=53016, forced=None, gain=2.5, embed=0.2,
        cross_out=0.1),
    "distilbart-cnn-12-6": dict(
        # 12 encoder and 6 decoder layers cut to 2 and 1: the stacks keep unequal depths.
        config={
            "_num_labels": 3, "activation_dropout": 0.0, "activation_function": "gelu",
            "add_bias_logits": False, "add_final_layer_norm": False,
            "architectures": ["BartForConditionalGeneration"], "attention_dropout": 0.0,
            "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0,
            "d_model": 1024, "decoder_attention_heads": 16, "decoder_ffn_dim": 4096,
            "decoder_layerdrop": 0.0, "decoder_layers": 1, "decoder_start_token_id": 2,
            "dropout": 0.1, "early_stopping": True, "encoder_attention_heads": 16,
            "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 2, "extra_pos_embeddings": 2, "force_bos_token_to_be_generated": True,
            "forced_bos_token_id": 0, "forced_eos_token_id": 2, "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "init_std": 0.02,
            "is_encoder_decoder": True, "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "length_penalty": 2.0, "max_length": 142, "max_position_embeddings": 1024,
            "min_length": 56, "model_type": "bart", "no_repeat_ngram_size": 3,
            "normalize_before": False, "normalize_embedding": True, "num_beams": 4,
            "num_hidden_layers": 2, "output_past": True, "pad_token_id": 1, "prefix": " ",
            "replacing_rate": 0, "scale_embedding": False, "static_position_embeddings": False,
            "student_decoder_layers": None, "student_encoder_layers": None,
            "task_specific_params": {"summarization": {
                "early_stopping": True, "length_penalty": 2.0, "max_length": 142,
                "min_length": 56, "no_repeat_ngram_size": 3, "num_beams": 4}},
            "transformers_version": "4.7.0.dev0", "use_cache": True, "vocab_size": 50264},
        generation={"bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True,
                    "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2,
                    "length_penalty": 2.0, "max_length": 142, "min_length": 56,
                    "no_repeat_ngram_size": 3, "num_beams": 4, "pad_token_id": 1,
                    "transformers_version": "4.27.0.dev0"},
        # <s> first; the forced BOS <s>.
        src_prefix=[0], eos=2, pad=1, start=2, forced=0, gain=3.0, embed=1.0, cross_out=0.1,
        seed=3),
    "t5-v1_1-small": dict(
        config={
            "architectures": ["T5ForConditionalGeneration"], "d_ff": 1024, "d_kv": 64,
            "d_model": 512, "decoder_start_token_id": 0, "dropout_rate": 0.1,
            "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
            "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5",
            "num_decoder_layers": 2, "num_heads": 6, "num_layers": 2, "output_past": True,
            "pad_token_id": 0, "relative_attention_num_buckets": 32,
            "tie_word_embeddings": False, "vocab_size": 32128},
        generation={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=2.5, embed=1.0,
        cross_out=0.3, rel=1.0, head=1.0, seed=8, untied_head=True,
        head_gen="lm_head.weight#1",
        copies=[("encoder.embed_tokens.weight", "shared.weight"),
                ("decoder.embed_tokens.weight", "shared.weight")]),
    "flan-t5-base": dict(
        config={
            "architectures": ["T5ForConditionalGeneration"], "d_ff": 2048, "d_kv": 64,
            "d_model": 768, "decoder_start_token_id": 0, "dropout_rate": 0.1,
            "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
            "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5",
            "n_positions": 512, "num_decoder_layers": 2, "num_heads": 12, "num_layers": 2,
            "output_past": True, "pad_token_id": 0, "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32,
            "task_specific_params": {
                "summarization": {"early_stopping": True, "length_penalty": 2.0,
                                  "max_length": 200, "min_length": 30,
                                  "no_repeat_ngram_size": 3, "num_beams": 4,
                                  "prefix": "summarize: "},
                "translation_en_to_de": {"early_stopping": True, "max_length": 300,
                                         "num_beams": 4,
                                         "prefix": "translate English to German: "},
                "translation_en_to_fr": {"early_stopping": True, "max_length": 300,
                                         "num_beams": 4,
                                         "prefix": "translate English to French: "},
                "translation_en_to_ro": {"early_stopping": True, "max_length": 300,
                                         "num_beams": 4,
                                         "prefix": "translate English to Romanian: "}},
            "tie_word_embeddings": False, "transformers_version": "4.23.1", "use_cache": True,
            "vocab_size": 32128},
        generation={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.27.0.dev0"},
        src_prefix=[], eos=1, pad=0, start=0, forced=None, gain=2.5, embed=1.0,
        cross_out=0.3, rel=1.0, head=1.0, untied_head=True,
        copies=[("encoder.embed_tokens.weight", "shared.weight"),
                ("decoder.embed_tokens.weight", "shared.weight")]),
    "whisper-base": whisper_2022("openai/whisper-base", d_model=512, heads=8, ffn=2048),
    "whisper-large-v2": whisper_2022("openai/whisper-large-v2", d_model=1280, heads=20, ffn=5120),
    # 12 encoder and 12 decoder layers cut to 2 each.
    "whisper-small": whisper_2022("openai/whisper-small", d_model=768, heads=12, ffn=3072),
    # 24 encoder and 24 decoder layers cut to 2 each.
    "whisper-medium": whisper_2022("openai/whisper-medium", d_model=1024, heads=16, ffn=4096),
    "whisper-large-v3-turbo": dict(
        # 32 encoder layers cut to 2; the published 4 decoder layers kept.
        config={
            "_name_or_path": "/raid/yoach/tmp_whisper_turbo", "activation_dropout": 0.0,
            "activation_function": "gelu", "apply_spec_augment": False,
            "architectures": ["WhisperForConditionalGeneration"], "attention_dropout": 0.0,
            "begin_suppress_tokens": [220, 50256], "bos_token_id": 50257,
            "classifier_proj_size": 256, "d_model": 1280, "decoder_attention_heads": 20,
            "decoder_ffn_dim": 5120, "decoder_layerdrop": 0.0, "decoder_layers": 4,
            "decoder_start_token_id": 50258, "dropout": 0.0, "encoder_attention_heads": 20,
            "encoder_ffn_dim": 5120, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 50257, "init_std": 0.02, "is_encoder_decoder": True,
            "mask_feature_length": 10, "mask_feature_min_masks": 0, "mask_feature_prob": 0.0,
            "mask_time_length": 10, "mask_time_min_masks": 2, "mask_time_prob": 0.05,
            "max_source_positions": 1500, "max_target_positions": 448,
            "median_filter_width": 7, "model_type": "whisper", "num_hidden_layers": 2,
            "num_mel_bins": 128, "pad_token_id": 50257, "scale_embedding": False,
            "torch_dtype": "float16", "transformers_version": "4.46.0.dev0", "use_cache": True,
            "use_weighted_layer_sum": False, "vocab_size": 51866},
        generation={"begin_suppress_tokens": [220, 50257], "bos_token_id": 50257,
                    "decoder_start_token_id": 50258, "eos_token_id": 50257,
                    "is_multilingual": True, "max_initial_timestamp_index": 50,
                    "max_length": 448, "no_timestamps_token_id": 50364, "pad_token_id": 50257,
                    "prev_sot_token_id": 50362, "return_timestamps": False,
                    "task_to_id": {"transcribe": 50360, "translate": 50359},
                    "transformers_version": "4.46.0.dev0"},
        prompt=[50258, 50259, 50360, 50364], eos=50257, pad=50257, mel=1.0, gain=2.0,
        embed=0.5, pos=2.0, cross_out=0.1),
    "led-base-16384": dict(
        # bart-base's layout with its position table copied 16 times (the model card): a
        # 1024-token window in every encoder layer. Global attention on the first token, as the
        # model card puts it for summarisation (`global_tokens`).
        config={
            "activation_dropout": 0.0, "activation_function": "gelu",
            "architectures": ["LEDForConditionalGeneration"], "attention_dropout": 0.0,
            "attention_window": [1024, 1024], "bos_token_id": 0, "classif_dropout": 0.0,
            "classifier_dropout": 0.0, "d_model": 768, "decoder_attention_heads": 12,
            "decoder_ffn_dim": 3072, "decoder_layerdrop": 0.0, "decoder_layers": 2,
            "decoder_start_token_id": 2, "dropout": 0.1, "encoder_attention_heads": 12,
            "encoder_ffn_dim": 3072, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 2, "gradient_checkpointing": False, "init_bias": 0.0,
            "init_std": 0.02, "is_encoder_decoder": True,
            "max_decoder_position_embeddings": 1024, "max_encoder_position_embeddings": 16384,
            "model_type": "led", "num_hidden_layers": 2, "pad_token_id": 1,
            "transformers_version": "4.2.0.dev0", "use_cache": True, "vocab_size": 50265},
        generation={"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2,
                    "pad_token_id": 1, "transformers_version": "4.27.0.dev0"},
        # <s> first; no forced BOS.
        src_prefix=[0], eos=2, pad=1, start=2, forced=None, gain=3.0, embed=1.0, cross_out=0.1,
        global_tokens=1, src_len=1100, seed=16),
    # 300 tokens: past the 127-key radius on both sides of most queries.
    "long-t5-local-base": longt5_base("local", 300, seed=12),
    # 40 tokens: two blocks of 16 and a tail of 8 that joins the second.
    "long-t5-tglobal-base": longt5_base("transient-global", 40, seed=13),
}


def uniform_scale(std):
    """The half-width of a uniform distribution of standard deviation `std`."""
    return float(std * np.sqrt(3.0))


def plan_init(model, row):
    """{parameter or buffer name: manifest fields} for every tensor of the model."""
    c = model.config
    t5 = c.model_type in ("t5", "mt5", "longt5")
    plan = {}
    modules = dict(model.named_modules())
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if not tensor.is_floating_point():
            continue
        owner = modules[name.rsplit(".", 1)[0]] if "." in name else model
        kind = type(owner).__name__
        leaf = name.rsplit(".", 1)[-1]
        entry = dict(gen=name, shape=list(tensor.shape), offset=0.0, scale=0.0)
        if isinstance(owner, torch.nn.Linear) and leaf == "weight":
            std = row["gain"] / np.sqrt(owner.in_features)
            if t5 and name.endswith((".q.weight",)):
                std /= np.sqrt(c.d_kv)  # T5 has no 1/sqrt(d_kv) in attention
            if "encoder_attn.out_proj" in name or "EncDecAttention.o" in name:
                std *= row["cross_out"]
            if name == "lm_head.weight" and t5:
                std = row["head"]
            entry["scale"] = uniform_scale(std)
        elif isinstance(owner, torch.nn.Linear):
            entry["scale"] = uniform_scale(0.1)
        elif isinstance(owner, torch.nn.Conv1d) and leaf == "weight":
            fan_in = owner.in_channels * owner.kernel_size[0]
            entry["scale"] = uniform_scale(row["gain"] / np.sqrt(fan_in))
        elif isinstance(owner, torch.nn.Conv1d):
            entry["scale"] = uniform_scale(0.1)
        elif isinstance(owner, torch.nn.LayerNorm) or kind.endswith("T5LayerNorm"):
            entry.update(offset=1.0 if leaf == "weight" else 0.0, scale=uniform_scale(0.1))
        elif leaf == "relative_attention_bias" or "relative_attention_bias" in name:
            entry["scale"] = uniform_scale(row["rel"])
        elif "Sinusoidal" in kind and not row.get("stored_sinusoids"):
            continue  # sinusoidal tables computed by the model
        elif "Sinusoidal" in kind:
            # Saved by `save_pretrained` (Pegasus), so read from the file: drawn as a table.
            entry["scale"] = uniform_scale(row.get("pos", 1.0))
        elif isinstance(owner, torch.nn.Embedding) and "embed_positions" in name:
            entry["scale"] = uniform_scale(row.get("pos", 1.0))
        elif isinstance(owner, torch.nn.Embedding):
            entry["scale"] = uniform_scale(row["embed"])
        elif leaf == "final_logits_bias":
            entry["scale"] = uniform_scale(0.1)
            entry["set"] = [[row["eos"], -1.0]]
        else:
            raise SystemExit(f"no init rule for {name} ({kind})")
        plan[name] = entry
    return plan


def zero_rows(model, plan, row):
    """Zero the EOS row of the output projection and the padding row of the tables (an untied
    head's EOS row is zeroed in its own entry, `untied_head_entry`)."""
    head = model.get_output_embeddings().weight
    shared = model.get_input_embeddings().weight
    for name, tensor in model.named_parameters(remove_duplicate=False):
        if tensor.data_ptr() == head.data_ptr() and name in plan \
                and not row.get("untied_head"):
            plan[name].setdefault("zero_rows", []).append(row["eos"])
        rows = plan.get(name, {}).get("zero_rows", [])
        t5 = model.config.model_type in ("t5", "mt5", "longt5")
        if tensor.data_ptr() == shared.data_ptr() and name in plan and not t5 \
                and row["pad"] not in rows:
            plan[name].setdefault("zero_rows", []).append(row["pad"])


def untied_head_entry(model, row, seed):
    """The manifest entry of the untied `lm_head.weight` the published T5 v1.1-family files
    store (`tie_word_embeddings: false`), which transformers 5's `save_pretrained` does not
    write (its T5 configs force the tie): drawn under its own generator name, so its values
    are not `shared`'s, at the head's gain, its EOS row zero."""
    c = model.config
    entry = dict(name="lm_head.weight", gen=row.get("head_gen", "lm_head.weight"),
                 shape=[c.vocab_size, c.d_model],
                 offset=0.0, scale=uniform_scale(row["head"]), zero_rows=[row["eos"]])
    values = gen.generate(entry, seed)
    entry["sum"] = float(values.astype(np.float64).sum())
    return entry, values


def with_untied_head(model, row, path, seed):
    """Adds the untied head to the saved file (as the published file holds it); its entry."""
    from safetensors.numpy import save_file

    entry, values = untied_head_entry(model, row, seed)
    saved = load_file(path)
    assert "lm_head.weight" not in saved, "save_pretrained wrote lm_head.weight"
    assert not np.array_equal(values, saved["shared.weight"])
    saved["lm_head.weight"] = values
    save_file(saved, path, metadata={"format": "pt"})
    return entry, values


def fill(model, plan, seed):
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if name in plan:
                tensor.copy_(torch.from_numpy(gen.generate(plan[name], seed)))


def manifest_of(model, plan, path, seed):
    """The file's tensors in order, each with the generator entry of the tensor it holds."""
    by_ptr = {}
    for name, tensor in list(model.named_parameters(remove_duplicate=False)) + list(
            model.named_buffers(remove_duplicate=False)):
        if name in plan:
            by_ptr.setdefault(tensor.data_ptr(), plan[name])
    state = model.state_dict()
    saved = load_file(path)
    entries = []
    for key in sorted(saved):
        source = by_ptr.get(state[key].data_ptr()) if key in state else None
        if source is None:
            raise SystemExit(f"{key}: saved tensor with no generator entry")
        entry = dict(name=key, **source)
        regenerated = gen.generate(entry, seed)
        entry["sum"] = float(regenerated.astype(np.float64).sum())
        stored = saved[key]
        if stored.dtype == np.float16:
            entry["dtype"] = "F16"
            regenerated = regenerated.astype(np.float16)
        elif stored.dtype != np.float32:
            raise SystemExit(f"{key}: saved as {stored.dtype}")
        if regenerated.tobytes() != stored.tobytes():
            raise SystemExit(f"{key}: the manifest does not regenerate the saved tensor")
        entries.append(entry)
    return entries


def with_copies(entries, copies):
    """The manifest with the byte copies published files hold (saved by transformers 4) that
    transformers 5 does not write."""
    by_name = {e["name"]: e for e in entries}
    extra = [dict(by_name[source], name=key) for key, source in copies]
    return sorted(entries + extra, key=lambda e: e["name"])


def row_inputs(row, vocab):
    """The encoder's input (source ids: the language code where the tokenizer puts one first,
    words, EOS; or, for speech, a generated log-mel spectrogram) and the teacher-forced decoder
    ids (start, forced BOS or Whisper's task tokens, then words)."""
    rng = np.random.default_rng(SEED)
    words = [int(w) for w in rng.integers(300, vocab - 300, 12)]
    prefix = prompt_of(row)
    forced = prefix + [int(w) for w in rng.integers(300, vocab - 300, 9 - len(prefix))]
    if "mel" in row:
        entry = dict(name="mel", gen="mel", shape=[row["config"]["num_mel_bins"], 3000],
                     offset=0.0, scale=row["mel"])
        mel = gen.generate(entry, SEED)
        entry["sum"] = float(mel.astype(np.float64).sum())
        return dict(mel=entry, mel_seed=SEED), dict(input_features=torch.from_numpy(mel[None])), forced
    length = row.get("src_len", 8)
    if length > 8:
        # A source longer than the attention's window or block (the long-document rows), drawn
        # apart so that the other rows keep their sources.
        long = np.random.default_rng(SEED + length).integers(300, vocab - 300, length)
        words = [int(w) for w in long]
    src = row["src_prefix"] + words[:length - len(row["src_prefix"])] + [row["eos"]]
    inputs = dict(input_ids=torch.tensor([src]))
    described = dict(src_ids=src)
    if "global_tokens" in row:
        # Longformer's global attention on the source's first tokens.
        inputs["global_attention_mask"] = torch.tensor(
            [[int(i < row["global_tokens"]) for i in range(len(src))]])
        described["global_tokens"] = row["global_tokens"]
    return described, inputs, forced


def prompt_of(row):
    if "prompt" in row:
        return list(row["prompt"])
    return [row["start"]] + ([row["forced"]] if row["forced"] is not None else [])


def teacher_forced(model, encoder_input, forced):
    dtype = next(model.parameters()).dtype
    inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in encoder_input.items()}
    with torch.no_grad():
        return model(**inputs, decoder_input_ids=torch.tensor([forced])).logits[0].numpy()


def manual_greedy(model, encoder_input, prompt):
    """Argmax by full forward passes (Whisper's own `generate` adds its rules)."""
    ids = list(prompt)
    for _ in range(MAX_NEW + 1 - len(prompt)):
        ids.append(int(np.argmax(teacher_forced(model, encoder_input, ids)[-1])))
    return ids


def sampled_columns(logits, step):
    top = np.argsort(-logits)[:TOP]
    drawn = gen.uniform(f"columns:{step}", SEED, SAMPLED)
    others = ((drawn + 1.0) * 0.5 * len(logits)).astype(np.int64)
    columns = sorted(set(int(i) for i in top) | set(int(i) for i in others))
    return [[c, float(logits[c])] for c in columns]


def hf_generate(model, encoder_input, prefix, beams):
    out = model.generate(**encoder_input, decoder_input_ids=torch.tensor([prefix]),
                         max_new_tokens=MAX_NEW + 1 - len(prefix), do_sample=False,
                         num_beams=beams, length_penalty=1.0, early_stopping=True,
                         repetition_penalty=1.0, no_repeat_ngram_size=0, min_length=0,
                         bad_words_ids=None, forced_eos_token_id=None,
                         renormalize_logits=False)
    return [int(t) for t in out[0].tolist()]


def min_gap(logits_rows):
    gaps = []
    for row in logits_rows:
        top = np.sort(row)[-2:]
        gaps.append(float(top[1] - top[0]))
    return min(gaps)


def write_expected(path, expected):
    """One line a field: the sampled logits make up most of the file."""
    with open(path, "w") as f:
        f.write("{\n")
        f.write(",\n".join(f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                           for k, v in expected.items()))
        f.write("\n}\n")


def build(name, row):
    from transformers import (AutoConfig, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq,
                              GenerationConfig)

    out = os.path.join(ROOT, name)
    os.makedirs(out, exist_ok=True)
    config = AutoConfig.for_model(**row["config"])
    torch.manual_seed(0)
    auto = AutoModelForSpeechSeq2Seq if "mel" in row else AutoModelForSeq2SeqLM
    model = auto.from_config(config).eval()
    model.generation_config = GenerationConfig(**{
        k: v for k, v in row["generation"].items() if k != "transformers_version"})
    plan = plan_init(model, row)
    zero_rows(model, plan, row)
    seed = row.get("seed", SEED)
    fill(model, plan, seed)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        path = os.path.join(tmp, "model.safetensors")
        entries = manifest_of(model, plan, path, seed)
        if row.get("untied_head"):
            head, head_values = with_untied_head(model, row, path, seed)
            entries = sorted(entries + [head], key=lambda e: e["name"])
        manifest = with_copies(entries, row.get("copies", []))
        # Loaded in float32 whatever the file's dtype: a float16 load would compute the tables
        # the checkpoint does not store (Marian's sinusoidal positions) in float16.
        ref = auto.from_pretrained(tmp, dtype=torch.float32).eval()
        if row.get("untied_head"):
            # transformers 5 leaves a stored head that differs from `shared` untied, as it
            # loads the published files.
            assert ref.lm_head.weight.data_ptr() != ref.shared.weight.data_ptr()
            assert np.array_equal(ref.lm_head.weight.detach().numpy(), head_values)
            assert not getattr(ref.config, "scale_decoder_outputs", False)  # mT5: none
        described, encoder_input, forced = row_inputs(row, config.vocab_size)
        single = teacher_forced(ref, encoder_input, forced)
        ref = ref.double()
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(row["config"], f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(row["generation"], f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(dict(seed=seed, tensors=manifest), f, indent=1)
        f.write("\n")

    prefix = prompt_of(row)
    logits = teacher_forced(ref, encoder_input, forced)
    sampled = [sampled_columns(step, i) for i, step in enumerate(logits)]
    extra = {}
    if row.get("untied_head"):
        # The same weights projected with `shared` (the tied model built above, unscaled as
        # transformers reads `tie_word_embeddings: false`): how far from the reference an
        # engine lands that ignores the head, at the columns the test checks.
        assert model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr()
        tied = teacher_forced(model.double(), encoder_input, forced)
        scale = float(np.abs(logits).max())
        extra["tied_head_distance"] = max(abs(float(tied[i][c]) - v) for i, step in
                                          enumerate(sampled) for c, v in step) / scale
    # How far float32 lands from float64 on these weights: a fixture whose float32 error
    # comes near the bound is ill-conditioned and would test rounding, not the engine.
    f32_error = float(np.abs(single - logits).max()) / max(1.0, float(np.abs(logits).max()))
    searches = {}
    if "mel" in row:
        greedy = manual_greedy(ref, encoder_input, prefix)
    else:
        greedy = hf_generate(ref, encoder_input, prefix, 1)
        searches["beam4_tokens"] = hf_generate(ref, encoder_input, prefix, 4)
    along = teacher_forced(ref, encoder_input, greedy[:-1])[len(prefix) - 1:]
    expected = dict(
        **described, decoder_input_ids=forced, prompt=prefix,
        logit_scale=float(np.abs(logits).max()),
        logits=sampled,
        greedy_tokens=greedy, **searches, greedy_margin=min_gap(along),
        float32_error=f32_error,
        distinct_greedy=len(set(greedy[len(prefix):])), **extra)
    write_expected(os.path.join(out, "expected.json"), expected)
    print(f"{name}: {sum(np.prod(e['shape']) for e in manifest) / 1e6:.1f} M values, "
          f"float32 error {f32_error:.2e} of the scale, "
          f"greedy {greedy} (margin {expected['greedy_margin']:.3g}, "
          f"scale {expected['logit_scale']:.3g}), beam4 {searches.get('beam4_tokens')}"
          + (f", tied head {extra['tied_head_distance']:.3g} of the scale away" if extra else ""))


def main():
    names = sys.argv[1:] or list(ROWS)
    for name in names:
        build(name, ROWS[name])


if __name__ == "__main__":
    main()
