#!/usr/bin/env python3
"""Regenerate the tokenizer fixtures of published checkpoint layouts in
text/tests/fixtures/layouts/: what `transformers` encodes and decodes there, and the
vocabulary CTranslate2's converter writes for those tokenizers.

- opus/: an OPUS-MT directory as the Hugging Face conversions ship it: an English
  `source.spm` and a German `target.spm` trained apart (so the source model does not know
  "ü" or "ß"), `vocab.json` built from the pieces of both sides, and for the
  `separate_vocabs` layout `separate_vocab.json` / `separate_target_vocab.json` (copied to
  vocab.json / target_vocab.json by the tests). expected.json: MarianTokenizer's source ids,
  target ids (`text_target`) and decoded text (skip_special_tokens=True), shared and separate.
- t5/: a T5 `spiece.model` (<pad> 0, </s> 1, <unk> 2, as t5-small's) and the vocabulary
  `ct2-transformers-converter` writes for a T5 model whose embedding is padded to a multiple
  of 128 (`ct2_spiece_vocabulary.json`: only spiece.model next to the model;
  `ct2_json_vocabulary.json`: the tokenizer.json of ../t5). expected.json: T5Tokenizer's ids
  and decoded text, with <unk>, sentinels and ids of the padding rows among the decoded ids;
  `tokenizer_json_decode`: the same for the tokenizer.json of ../t5.
- m2m100/: the decoded text of ids past the vocabulary (the `madeupwordN` rows) with the
  M2M100Tokenizer of ../m2m100 in the published layout (the `__xx__` language tokens as
  `additional_special_tokens`), and the converter's vocabulary for a model of the published
  size (vocabulary + 100 languages + 8 made-up words).

The CTranslate2 vocabularies come from running `ctranslate2.converters.TransformersConverter`
on random-weight models of one tiny layer built with the `transformers` classes; only the
vocabulary file is kept.

Usage: python3 tools/make_text_layouts_golden.py   (needs sentencepiece, transformers, torch,
ctranslate2; reads ../spm, ../t5 and ../m2m100 written by tools/make_text_golden.py; about
half a minute on one core)
"""

import json
import os
import random
import shutil
import tempfile

import sentencepiece as spm

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text", "tests", "fixtures")
OUT = os.path.join(ROOT, "layouts")

ENGLISH = [
    "The weather is nice today and the sun is shining.",
    "We translate short sentences from English into German.",
    "A small model runs on the processor of a laptop.",
    "Please send the letter to my friend in the city.",
    "The train leaves the station at eight in the morning.",
    "Children play in the park while their parents talk.",
    "This book is about the history of the river and the town.",
    "Numbers like 12, 345 and 6789 appear in the text.",
    "Where is the nearest bank? How much does it cost?",
    "Good morning, good evening and good night to everyone.",
]

GERMAN = [
    "Das Wetter ist heute schön und die Sonne scheint.",
    "Wir übersetzen kurze Sätze aus dem Englischen ins Deutsche.",
    "Ein kleines Modell läuft auf dem Prozessor eines Laptops.",
    "Bitte schicke den Brief an meinen Freund in der Stadt.",
    "Der Zug fährt um acht Uhr morgens vom Bahnhof ab.",
    "Kinder spielen im Park, während ihre Eltern reden.",
    "Dieses Buch handelt von der Geschichte des Flusses und der Straße.",
    "Grüße aus München, Köln und Düsseldorf von Herrn Müller.",
    "Wo ist die nächste Bank? Wie viel kostet es?",
    "Guten Morgen, guten Abend und gute Nacht an alle.",
]

# Source texts: English, and English with the German characters the source model never saw.
SOURCE_TESTS = ENGLISH + [
    "Mr Müller lives on the Straße in München.",
    "Grüße from Köln, Düsseldorf and Zürich!",
    "ß ü ö ä Ä Ö Ü",
    "Unseen by both: ł, ø, ñ and 日本.",
    "",
    "  spaces   around  ",
    ">>deu<< The weather is nice.",
]

TARGET_TESTS = GERMAN + [
    "Herr Müller wohnt in der Straße.",
    "Weather, laptop and processor are English words.",
    "Unbekannt: ł, ø, ñ und 日本.",
    "",
]

# T5: an English corpus (t5-small's tokenizer is trained on English C4).
T5_TESTS = ENGLISH + [
    "Unknown: ł, ø, ñ, 日本 and 😀.",
    "",
    "  spaces   around  ",
    "a <unk> b </s> c",
    "Tabs\tand\nnew lines",
    "no\u00a0break and\u3000ideographic space",
]


def corpus(lines, n=600, seed=5):
    rng = random.Random(seed)
    words = " ".join(lines).split()
    out = list(lines) * 10
    for _ in range(n):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 10))))
    return out


def train(tmp, name, lines, vocab_size, **kwargs):
    cwd = os.getcwd()
    os.chdir(tmp)
    with open(name + ".txt", "w", encoding="utf-8") as f:
        f.write("\n".join(corpus(lines)) + "\n")
    spm.SentencePieceTrainer.train(
        input=name + ".txt",
        model_prefix=name,
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=1.0,
        # No character map keeps the models a few KB (nmt_nfkc's is 240 KB).
        normalization_rule_name="identity",
        num_threads=1,
        hard_vocab_limit=False,
        minloglevel=2,
        **kwargs,
    )
    os.chdir(cwd)
    return os.path.join(tmp, name + ".model")


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def pieces(model):
    sp = spm.SentencePieceProcessor(model_file=model)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]


def marian_vocab(*models):
    """vocab.json as the OPUS-MT conversions have it: </s> 0, <unk> 1, the pieces, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1, ">>deu<<": 2}
    for m in models:
        for p in pieces(m):
            vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


def cases(tok, src, tgt, decode_extra):
    encode = [{"text": t, "ids": tok(t)["input_ids"]} for t in src]
    target = [{"text": t, "ids": tok(text_target=t)["input_ids"]} for t in tgt]
    dec = [c["ids"] for c in target] + decode_extra
    decode = [{"ids": ids, "text": tok.decode(ids, skip_special_tokens=True)} for ids in dec]
    return {"encode": encode, "target": target, "decode": decode}


def random_ids(rng, n, count=12, length=10):
    return [[rng.randrange(n) for _ in range(rng.randint(1, length))] for _ in range(count)]


def make_opus(tmp):
    import transformers as tf

    src = train(tmp, "source", ENGLISH, 120)
    tgt = train(tmp, "target", GERMAN, 150)
    out = os.path.join(OUT, "opus")
    os.makedirs(out, exist_ok=True)
    shutil.copy(src, os.path.join(out, "source.spm"))
    shutil.copy(tgt, os.path.join(out, "target.spm"))
    shared = marian_vocab(src, tgt)
    write_json(os.path.join(out, "vocab.json"), shared)
    source_only = marian_vocab(src)
    target_only = marian_vocab(tgt)
    write_json(os.path.join(out, "separate_vocab.json"), source_only)
    write_json(os.path.join(out, "separate_target_vocab.json"), target_only)
    rng = random.Random(3)
    v = os.path.join(out, "vocab.json")
    tok = tf.MarianTokenizer(os.path.join(out, "source.spm"), os.path.join(out, "target.spm"), v)
    expected = {"shared": cases(tok, SOURCE_TESTS, TARGET_TESTS, random_ids(rng, len(shared)))}
    tok = tf.MarianTokenizer(
        os.path.join(out, "source.spm"),
        os.path.join(out, "target.spm"),
        os.path.join(out, "separate_vocab.json"),
        target_vocab_file=os.path.join(out, "separate_target_vocab.json"),
        separate_vocabs=True,
    )
    expected["separate"] = cases(tok, SOURCE_TESTS, TARGET_TESTS, random_ids(rng, len(target_only)))
    write_json(os.path.join(out, "expected.json"), expected)


def padded(n):
    return (n + 127) // 128 * 128


def ct2_vocabulary(tmp, name, model, tokenizer_files):
    """The shared vocabulary CTranslate2's converter writes for `model` saved with the files."""
    import ctranslate2

    d = os.path.join(tmp, name + "_hf")
    model.save_pretrained(d)
    for src, dst in tokenizer_files:
        shutil.copy(src, os.path.join(d, dst))
    out = os.path.join(tmp, name + "_ct2")
    ctranslate2.converters.TransformersConverter(d).convert(out, force=True)
    with open(os.path.join(out, "shared_vocabulary.json"), encoding="utf-8") as f:
        return json.load(f)


def make_t5(tmp):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    model_file = train(tmp, "spiece", ENGLISH, 200, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    out = os.path.join(OUT, "t5")
    os.makedirs(out, exist_ok=True)
    shutil.copy(model_file, os.path.join(out, "spiece.model"))
    d = os.path.join(tmp, "t5_spiece")
    os.makedirs(d)
    shutil.copy(model_file, os.path.join(d, "spiece.model"))
    tok = tf.T5Tokenizer.from_pretrained(d)
    n = len(tok)
    vocab_size = padded(n)
    rng = random.Random(4)
    extra = [[4, tok.unk_token_id, 5], [4, n, 5, vocab_size - 1], [n - 1, 6, n - 100, tok.eos_token_id]]
    extra += random_ids(rng, vocab_size)
    expected = cases(tok, T5_TESTS, T5_TESTS[:4], extra)
    expected["vocab_size"] = vocab_size

    config = dict(vocab_size=vocab_size, d_model=8, d_ff=8, d_kv=4, num_heads=2, num_layers=1)
    model = tf.T5ForConditionalGeneration(tf.T5Config(**config))
    write_json(
        os.path.join(out, "ct2_spiece_vocabulary.json"),
        ct2_vocabulary(tmp, "t5_spiece", model, [(model_file, "spiece.model")]),
    )

    # The tokenizer.json of ../t5 (a converted T5Tokenizer) in a padded model.
    json_dir = os.path.join(ROOT, "t5")
    json_tok = tf.AutoTokenizer.from_pretrained(json_dir)
    config["vocab_size"] = padded(len(json_tok))
    model = tf.T5ForConditionalGeneration(tf.T5Config(**config))
    files = [(os.path.join(json_dir, f), f) for f in ("tokenizer.json", "tokenizer_config.json")]
    write_json(os.path.join(out, "ct2_json_vocabulary.json"), ct2_vocabulary(tmp, "t5_json", model, files))
    m = len(json_tok)
    ids = [[4, m, 5], [4, config["vocab_size"] - 1, 5, m + 3], [m - 1, 4, json_tok.unk_token_id, 5]]
    expected["tokenizer_json_decode"] = [
        {"ids": i, "text": json_tok.decode(i, skip_special_tokens=True)} for i in ids
    ]
    write_json(os.path.join(out, "expected.json"), expected)


def make_m2m100(tmp):
    import torch
    import transformers as tf
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    torch.manual_seed(0)
    src = os.path.join(ROOT, "m2m100")
    d = os.path.join(tmp, "m2m100_tok")
    os.makedirs(d)
    shutil.copy(os.path.join(ROOT, "spm", "bpe.model"), os.path.join(d, "sentencepiece.bpe.model"))
    shutil.copy(os.path.join(src, "vocab.json"), os.path.join(d, "vocab.json"))
    langs = [f"__{c}__" for c in FAIRSEQ_LANGUAGE_CODES["m2m100"]]
    # As facebook/m2m100_418M's special_tokens_map.json lists them.
    tok = tf.M2M100Tokenizer(
        os.path.join(d, "vocab.json"),
        os.path.join(d, "sentencepiece.bpe.model"),
        src_lang="en",
        tgt_lang="fr",
        additional_special_tokens=langs,
    )
    n = len(tok.get_vocab())
    vocab_size = n + tok.num_madeup_words
    fr = tok.get_lang_id("fr")
    ids = [
        [fr, 10, 11, 2],
        [fr, 10, n, 11, 2],
        [10, 12, n + 7, 13, 14],
        [n + 1, 10, 11, n + 2],
        [fr, 20, 21, 22, n + 3, n + 4, 23, 2],
    ]
    out = os.path.join(OUT, "m2m100")
    os.makedirs(out, exist_ok=True)
    decode = [{"ids": i, "text": tok.decode(i, skip_special_tokens=True)} for i in ids]
    write_json(os.path.join(out, "expected.json"), {"vocab_size": vocab_size, "decode": decode})
    config = tf.M2M100Config(
        vocab_size=vocab_size,
        d_model=8,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=8,
        decoder_ffn_dim=8,
        max_position_embeddings=32,
    )
    model = tf.M2M100ForConditionalGeneration(config)
    tok.save_pretrained(os.path.join(tmp, "m2m100_saved"))
    files = [(os.path.join(tmp, "m2m100_saved", f), f) for f in os.listdir(os.path.join(tmp, "m2m100_saved"))]
    write_json(os.path.join(out, "ct2_vocabulary.json"), ct2_vocabulary(tmp, "m2m100", model, files))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        make_opus(tmp)
        make_t5(tmp)
        make_m2m100(tmp)


if __name__ == "__main__":
    main()
