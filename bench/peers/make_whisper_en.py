#!/usr/bin/env python3
"""A random-weight Whisper at the real shape of tiny.en, base.en or small.en, for speed runs
(never committed).

tiny: d_model 384, 4 encoder + 4 decoder layers, 6 heads, ffn 1536; base: 512, 6 + 6, 8 heads,
ffn 2048; small: 768, 12 + 12, 12 heads, ffn 3072. Each with 80 mel bins, 1500 source and
448 target positions, the real 51864-token `.en` vocabulary: GPT-2's byte-level BPE (built
from openai-whisper's `gpt2.tiktoken` with transformers' TikTokenConverter: 50256 text tokens),
then <|endoftext|> 50256, <|startoftranscript|> 50257, 99 languages, the six task tokens,
<|notimestamps|> 50362 and 1501 timestamps. Weights are drawn and scaled exactly as
tools/make_whisper_golden.py draws them (so that decoding does not collapse onto one token),
saved with transformers and converted with ct2-transformers-converter:

    OUT/hf        transformers directory (safetensors, tokenizer.json, configs)
    OUT/ct2       CTranslate2 float32
    OUT/ct2_f16   CTranslate2 float16
    OUT/clip15.wav  15 s of espeak-ng speech, 16 kHz mono int16
    OUT/clip30.wav  30 s (the clip's speech repeated and padded), one full window

    python3 bench/peers/make_whisper_en.py [OUT=/tmp/whisper_tiny_en] [--shape tiny|base|small]
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

import make_whisper_golden as g  # noqa: E402

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

TEXT = ("Whisper is a general purpose speech recognition model. It is trained on a large "
        "dataset of diverse audio and is also a multitasking model that can perform "
        "multilingual speech recognition, speech translation, and language identification.")

CONFIG = dict(
    num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
    text_tokens=50256, timestamps=1501, english_only=True,
)

# The published sizes' widths and depths.
SHAPES = {
    "tiny": dict(d_model=384, heads=6, encoder_layers=4, decoder_layers=4, ffn=1536, seed=384),
    "base": dict(d_model=512, heads=8, encoder_layers=6, decoder_layers=6, ffn=2048, seed=512),
    "small": dict(d_model=768, heads=12, encoder_layers=12, decoder_layers=12, ffn=3072,
                  seed=768),
}


def build_tokenizer(c, out_dir):
    import whisper
    from tokenizers import AddedToken
    from transformers import WhisperTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    assets = os.path.join(os.path.dirname(whisper.__file__), "assets")
    tok = TikTokenConverter(vocab_file=os.path.join(assets, "gpt2.tiktoken"),
                            pattern=GPT2_PATTERN).converted()
    assert tok.get_vocab_size() == c["text_tokens"], tok.get_vocab_size()
    specials, stamps = g.special_tokens(c)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in stamps])
    fast = WhisperTokenizerFast(
        tokenizer_object=tok, unk_token="<|endoftext|>", bos_token="<|endoftext|>",
        eos_token="<|endoftext|>", pad_token="<|endoftext|>",
    )
    ids = fast.convert_tokens_to_ids(specials + stamps)
    assert ids == list(range(c["text_tokens"], c["text_tokens"] + len(ids))), ids
    fast.save_pretrained(out_dir)
    return fast


def main():
    import ctranslate2
    import whisper
    from transformers import WhisperFeatureExtractor

    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default="/tmp/whisper_tiny_en")
    p.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    a = p.parse_args()
    out = a.out
    c = dict(CONFIG, **SHAPES[a.shape], languages=list(whisper.tokenizer.LANGUAGES)[:99])
    hf, ct2, ct2_16 = (os.path.join(out, d) for d in ("hf", "ct2", "ct2_f16"))
    os.makedirs(hf, exist_ok=True)
    tokenizer = build_tokenizer(c, hf)
    model, ids = g.make_model(c, tokenizer.convert_tokens_to_ids("\u0120"))
    assert model.config.vocab_size == 51864, model.config.vocab_size
    model.float().save_pretrained(hf, safe_serialization=True)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(hf)
    for d, q in ((ct2, None), (ct2_16, "float16")):
        conv = ctranslate2.converters.TransformersConverter(
            hf, copy_files=["tokenizer.json", "preprocessor_config.json"])
        conv.convert(d, quantization=q, force=True)
    g.speech(TEXT, 15 * 16000, os.path.join(out, "clip15.wav"))
    g.speech(TEXT + " " + TEXT, 30 * 16000, os.path.join(out, "clip30.wav"))
    print(out)


if __name__ == "__main__":
    main()
