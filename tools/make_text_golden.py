#!/usr/bin/env python3
"""Regenerate the tokenizer golden fixtures in text/tests/fixtures/.

Trains small tokenizers with the reference Python libraries on a multi-script corpus written
for this script (licence-clean: every sentence below was written here or is generated from
those words by a seeded RNG), builds the family tokenizers with `transformers` and the Whisper
tokenizer with `tiktoken` + `openai-whisper`, and records ids and decoded text as JSON:

- spm/{unigram,bpe,unigram_bytes,bpe_bytes}.model + .json: `sentencepiece` encode ids and
  decode text (also of id sequences with controls, unknowns and stray byte pieces).
- bytebpe/tokenizer.json + .json: a byte-level BPE trained with `tokenizers`, ids and decode.
- whisper/{multilingual,v3}/tokenizer.json + .json: a byte-level BPE in tiktoken form with
  Whisper's special tokens (99 or 100 languages, timestamps <|0.00|>..<|30.00|>); ids from
  `tiktoken`, decoded text from `whisper.tokenizer.Tokenizer`, prompts, sot sequences,
  the non-speech token set.
- marian/, t5/, nllb/, mbart50/, mbart/, m2m100/, bart/, pegasus/: model-directory files as the families ship
  them and the ids/decoded text of the `transformers` tokenizers.

Usage: python3 tools/make_text_golden.py   (needs sentencepiece, tokenizers, transformers,
tiktoken, openai-whisper; a few seconds on one core)
"""

import base64
import json
import os
import random
import shutil
import tempfile

import sentencepiece as spm
import tiktoken
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tokenizers import processors
from whisper.tokenizer import LANGUAGES, Tokenizer as WhisperTok

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text", "tests", "fixtures")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Tessel runs encoder-decoder models on the CPU, one token at a time.",
    "Crème brûlée, naïve café, façade, jalapeño and Ångström are borrowed words.",
    "Zürich, Kraków, São Paulo, Reykjavík and Ljubljana are cities.",
    "Привет, мир! Как дела? Сегодня хорошая погода.",
    "Москва и Санкт-Петербург — крупнейшие города России.",
    "Καλημέρα κόσμε. Η γλώσσα είναι ελληνική.",
    "Ο ήλιος λάμπει πάνω από τη θάλασσα.",
    "مرحبا بالعالم. كيف حالك اليوم؟",
    "اللغة العربية تكتب من اليمين إلى اليسار.",
    "你好，世界。今天天气很好。",
    "我们在电脑上运行翻译模型。",
    "こんにちは世界。日本語の文章です。",
    "東京は大きな都市です。",
    "안녕하세요 세계. 한국어 문장입니다.",
    "Emoji: 😀 🎉 👍🏽 👩‍💻 🇫🇷 and ❤️ appear in chats.",
    "Numbers 0123456789, 3.14159, 1,000,000 and 2026-11-23 12:34.",
    "Prices: $5.99, €12,50, £7 and ¥300; 50% off!",
    "Tabs\tand  double  spaces,\nnew lines and   runs of spaces.",
    "Hello world, hello again; the world says hello back.",
    "Translation quality depends on the tokenizer and the model.",
    "Mixed: English, русский, ελληνικά, العربية, 中文 and 日本語.",
    "Quotes «guillemets», „Anführungszeichen“ and “curly quotes”.",
    "Math: x² + y² = z², ½ + ¼ = ¾, and α→β.",
]

WORDS = " ".join(SENTENCES).split()

# Inputs the tokenizers must handle exactly like the references: odd whitespace, NFKC cases,
# characters never seen in training (unknown or byte fallback), empty and blank strings.
TESTS = SENTENCES + [
    "",
    " ",
    "   leading and trailing spaces   ",
    "\tTab at the start and the end\t",
    "Line one\nLine two\r\nLine three",
    "no\u00a0break\u00a0spaces and\u3000ideographic\u3000space",
    "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ and ﬁ ligature and ① ② ③",
    "e\u0301 combining accent vs é precomposed",
    "Unseen script: ᚠᚢᚦᚨᚱᚲ and ⴰⵣⵓⵍ and ꦲꦏ꧀ꦱꦫ",
    "Rare emoji 🦩🪼🫠 and symbols ⌘ ⌥ ⎋",
    "hello",
    "HELLO WORLD!!!",
    "a  b   c    d",
    "’Curly apostrophe’s and it's and we'll",
    "1234567890123456789",
    "Ünïcödé Üml̈äuts",
    "🇯🇵🇰🇷🇨🇳",
    "zero\u200bwidth\u200bspace and soft\u00adhyphen",
    "control text <s> x</s> <unk> <pad> and byte text <0x41><0xE2>",
]


def corpus_lines(n=3000, seed=7):
    rng = random.Random(seed)
    lines = list(SENTENCES) * 20
    for _ in range(n):
        k = rng.randint(3, 14)
        lines.append(" ".join(rng.choice(WORDS) for _ in range(k)))
    return lines


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


# A small normalization rule set (sentencepiece's TSV form: source code points, target code
# points): a precompiled charsmap of a few KB where nmt_nfkc's is ~240 KB.
RULES = (
    [(f"{0xFF21 + i:X}", f"{0x41 + i:X}") for i in range(26)]
    + [(f"{0xFF41 + i:X}", f"{0x61 + i:X}") for i in range(26)]
    + [("FB01", "66 69"), ("A0", "20"), ("3000", "20"), ("9", "20"), ("A", "20"), ("D", "20")]
    + [("65 301", "E9"), ("2460", "31"), ("2461", "32"), ("2462", "33"), ("BD", "31 2044 32")]
)


def train_spm(tmp, name, model_type, vocab_size, byte_fallback, rules, **ids):
    path = os.path.join(tmp, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus_lines()) + "\n")
    prefix = os.path.join(tmp, name)
    kwargs = {}
    if rules == "custom":
        tsv = os.path.join(tmp, "rules.tsv")
        with open(tsv, "w") as f:
            f.write("".join(f"{a}\t{b}\n" for a, b in RULES))
        kwargs["normalization_rule_tsv"] = "rules.tsv"
    elif rules == "identity":
        kwargs["normalization_rule_name"] = "identity"
        kwargs["remove_extra_whitespaces"] = False
    # Relative paths: the trainer records them in the model, which then does not depend on
    # the temporary directory's name.
    cwd = os.getcwd()
    os.chdir(tmp)
    spm.SentencePieceTrainer.train(
        **kwargs,
        input="corpus.txt",
        model_prefix=name,
        model_type=model_type,
        vocab_size=vocab_size,
        byte_fallback=byte_fallback,
        character_coverage=0.995,
        num_threads=1,
        hard_vocab_limit=False,
        minloglevel=2,
        **ids,
    )
    os.chdir(cwd)
    return prefix + ".model"


def rng_ids(rng, n_vocab, count, length):
    return [[rng.randrange(n_vocab) for _ in range(rng.randint(0, length))] for _ in range(count)]


def make_spm(tmp):
    out = {}
    rng = random.Random(11)
    for name, model_type, size, byte_fallback, rules in [
        ("unigram", "unigram", 360, False, "nmt_nfkc"),
        ("bpe", "bpe", 360, False, "custom"),
        ("unigram_bytes", "unigram", 600, True, "custom"),
        ("bpe_bytes", "bpe", 600, True, "identity"),
    ]:
        model = train_spm(tmp, name, model_type, size, byte_fallback, rules)
        dst = os.path.join(ROOT, "spm", name + ".model")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(model, dst)
        sp = spm.SentencePieceProcessor(model_file=model)
        encode = [{"text": t, "ids": sp.encode(t)} for t in TESTS]
        for case in encode:
            case["decoded"] = sp.decode(case["ids"])
        decode = [{"ids": ids, "text": sp.decode(ids)} for ids in rng_ids(rng, sp.get_piece_size(), 40, 12)]
        if byte_fallback:
            # Stray and partial UTF-8 byte pieces between normal pieces.
            b = [sp.piece_to_id(f"<0x{x:02X}>") for x in (0xE2, 0x82, 0xAC, 0x80, 0xC3, 0x41)]
            for ids in [[b[0], b[1], b[2]], [b[0], b[1]], [b[3], 5, b[4]], [b[0], b[1], b[2], b[3]], [b[4], b[5]]]:
                decode.append({"ids": ids, "text": sp.decode(ids)})
        write_json(os.path.join(ROOT, "spm", name + ".json"), {"encode": encode, "decode": decode})
        out[name] = model
    return out


def make_bytebpe(tmp):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(), trainer)
    path = os.path.join(ROOT, "bytebpe", "tokenizer.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tok.save(path)
    rng = random.Random(12)
    encode = []
    for t in TESTS:
        ids = tok.encode(t).ids
        encode.append({"text": t, "ids": ids, "decoded": tok.decode(ids)})
    decode = [{"ids": ids, "text": tok.decode(ids)} for ids in rng_ids(rng, tok.get_vocab_size(), 40, 12)]
    write_json(os.path.join(ROOT, "bytebpe", "expected.json"), {"encode": encode, "decode": decode})
    return path


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


WHISPER_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def whisper_specials(num_languages):
    return [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *[f"<|{lang}|>" for lang in list(LANGUAGES.keys())[:num_languages]],
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *[f"<|{i * 0.02:.2f}|>" for i in range(1501)],
    ]


def tiktoken_ranks(bytebpe_path):
    """The byte-level BPE as tiktoken mergeable ranks: a token's rank is its id."""
    data = json.load(open(bytebpe_path, encoding="utf-8"))
    dec = {v: k for k, v in bytes_to_unicode().items()}
    ranks = {}
    for token, idx in data["model"]["vocab"].items():
        if token == "<|endoftext|>":
            continue
        ranks[bytes(dec[c] for c in token)] = len(ranks)
    return ranks


def whisper_tokenizer_json(ranks, specials):
    """tokenizer.json for a tiktoken vocabulary as transformers' TikTokenConverter builds it
    (every split of a token into two ranked parts is a merge, ordered by the token's rank;
    ignore_merges), with the GPT-2 byte-level pre-tokenizer of Whisper's tokenizer.json and the
    specials as added tokens after the ranks."""
    enc = bytes_to_unicode()

    def s(b):
        return "".join(enc[x] for x in b)

    vocab = {s(t): r for t, r in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        local = []
        for i in range(1, len(token)):
            l, r = token[:i], token[i:]
            if l in ranks and r in ranks:
                local.append((l, r, rank))
        local.sort(key=lambda x: (ranks[x[0]], ranks[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2])
    bpe = models.BPE(vocab, [(s(a), s(b)) for a, b, _ in merges], fuse_unk=False)
    tok = Tokenizer(bpe)
    tok.model.ignore_merges = True
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return tok


def make_whisper(bytebpe_path):
    ranks = tiktoken_ranks(bytebpe_path)
    rng = random.Random(13)
    for name, num_languages in [("multilingual", 99), ("v3", 100)]:
        specials = whisper_specials(num_languages)
        n = len(ranks)
        enc = tiktoken.Encoding(
            name=name,
            explicit_n_vocab=n + len(specials),
            pat_str=WHISPER_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={t: n + i for i, t in enumerate(specials)},
        )
        tok = whisper_tokenizer_json(ranks, specials)
        d = os.path.join(ROOT, "whisper", name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
        wt = WhisperTok(encoding=enc, num_languages=num_languages, language="en", task="transcribe")
        encode = []
        for t in TESTS:
            ids = enc.encode(t)
            assert tok.encode(t).ids == ids, (name, t)
            text = wt.decode([x for x in ids if x < wt.eot])
            encode.append({"text": t, "ids": ids, "decoded": text})
        # Model outputs: sot sequence, text tokens with timestamps, eot; as openai-whisper
        # decodes the text (tokens < eot) and as decode_with_timestamps renders them.
        decode = []
        for _ in range(30):
            seq = list(wt.sot_sequence)
            t = wt.timestamp_begin
            for _ in range(rng.randint(0, 4)):
                t += rng.randint(0, 200)
                seq.append(min(t, wt.timestamp_begin + 1500))
                seq += [rng.randrange(n) for _ in range(rng.randint(0, 6))]
                t += rng.randint(0, 100)
                seq.append(min(t, wt.timestamp_begin + 1500))
            seq.append(wt.eot)
            decode.append(
                {
                    "ids": seq,
                    "text": wt.decode([x for x in seq if x < wt.eot]),
                    "with_timestamps": wt.decode_with_timestamps(seq),
                }
            )
        sot = []
        for lang in ["en", "de", "zh", "yue" if num_languages == 100 else "haw", "su"]:
            for task in ["transcribe", "translate"]:
                w = WhisperTok(encoding=enc, num_languages=num_languages, language=lang, task=task)
                sot.append({"language": lang, "task": task, "ids": list(w.sot_sequence)})
        en = WhisperTok(encoding=enc, num_languages=num_languages)
        prompts = [
            {"text": p, "ids": [wt.sot_prev] + enc.encode(" " + p.strip())}
            for p in ["Glossary: tessel, Kraków.", "  Привет мир  ", "日本語", ""]
        ]
        special = {k: wt.special_tokens[k] for k in ["<|endoftext|>", "<|startoftranscript|>", "<|translate|>",
                                                     "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                                                     "<|nospeech|>", "<|notimestamps|>", "<|0.00|>", "<|30.00|>"]}
        write_json(
            os.path.join(d, "expected.json"),
            {
                "num_languages": num_languages,
                "special": special,
                "english_only_sot": list(en.sot_sequence),
                "encode": encode,
                "decode": decode,
                "sot": sot,
                "prompts": prompts,
                "non_speech_tokens": list(wt.non_speech_tokens),
            },
        )


def family_cases(tok, src_texts, tgt_texts, rng, drop=()):
    """Encode source texts and target texts; decode the target ids and random ids, skipping
    special tokens (and the ids in `drop`)."""
    encode = [{"text": t, "ids": tok(t)["input_ids"]} for t in src_texts]
    target = [{"text": t, "ids": tok(text_target=t)["input_ids"]} for t in tgt_texts]

    def dec(ids):
        return tok.decode([i for i in ids if i not in drop], skip_special_tokens=True)

    decode = [{"ids": c["ids"], "text": dec(c["ids"])} for c in target]
    n = len(tok)
    for ids in rng_ids(rng, n, 20, 10):
        decode.append({"ids": ids, "text": dec(ids)})
    return {"encode": encode, "target": target, "decode": decode}


def spm_pieces_vocab(*models):
    """A Marian/M2M100-style vocab.json: special tokens first, then every piece of the models."""
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for m in models:
        sp = spm.SentencePieceProcessor(model_file=m)
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            if not sp.is_control(i) and not sp.is_unknown(i):
                vocab.setdefault(p, len(vocab))
    return vocab


def make_families(tmp, spms, bytebpe):
    import transformers as tf

    rng = random.Random(14)
    src = TESTS
    tgt = SENTENCES[:8] + TESTS[-6:] + ["Spaces before punctuation , here . And there ! Isn 't it ? I 'm sure ."]

    # Marian: source.spm/target.spm mapped through vocab.json (</s> 0, <unk> 1, <pad> last),
    # two language codes in the vocabulary as multilingual OPUS-MT models have them.
    d = os.path.join(tmp, "marian")
    os.makedirs(d)
    shutil.copy(spms["unigram"], os.path.join(d, "source.spm"))
    shutil.copy(spms["bpe"], os.path.join(d, "target.spm"))
    vocab = {"</s>": 0, "<unk>": 1, ">>fra<<": 2, ">>deu<<": 3}
    for p in spm_pieces_vocab(spms["unigram"], spms["bpe"]):
        if p not in ("<s>", "<pad>", "</s>", "<unk>"):
            vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    write_json(os.path.join(d, "vocab.json"), vocab)
    tok = tf.MarianTokenizer(os.path.join(d, "source.spm"), os.path.join(d, "target.spm"), os.path.join(d, "vocab.json"))
    out = os.path.join(ROOT, "marian")
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(d, "vocab.json"), out)
    cases = family_cases(tok, src + [">>fra<< Bonjour le monde", ">>deu<<Hallo"], tgt, rng)
    write_json(os.path.join(out, "expected.json"), cases)

    # M2M100: sentencepiece.bpe.model mapped through vocab.json, __xx__ language tokens after it.
    d = os.path.join(tmp, "m2m100")
    os.makedirs(d)
    shutil.copy(spms["bpe"], os.path.join(d, "sentencepiece.bpe.model"))
    write_json(os.path.join(d, "vocab.json"), spm_pieces_vocab(spms["bpe"]))
    out = os.path.join(ROOT, "m2m100")
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(d, "vocab.json"), out)
    cases = {}
    for s_lang, t_lang in [("en", "fr"), ("ru", "zh")]:
        tok = tf.M2M100Tokenizer(os.path.join(d, "vocab.json"), os.path.join(d, "sentencepiece.bpe.model"),
                                 src_lang=s_lang, tgt_lang=t_lang)
        # transformers 5.23's M2M100Tokenizer no longer counts its __xx__ language tokens as
        # special, so decode(skip_special_tokens=True) keeps "__fr__ "; generation output is
        # decoded without them (transformers 4, fairseq), so they are dropped before decoding.
        lang_ids = set(tok.lang_code_to_id.values())
        cases[f"{s_lang}-{t_lang}"] = family_cases(tok, src, tgt, rng, drop=lang_ids)
        cases[f"{s_lang}-{t_lang}"]["forced_bos"] = tok.get_lang_id(t_lang)
    write_json(os.path.join(out, "expected.json"), cases)

    # Pegasus's SentencePiece layout: <pad> 0, </s> 1, <unk> 2, no <s>.
    pegasus_spm = train_spm(tmp, "pegasus", "unigram", 600, False, "custom", pad_id=0, eos_id=1,
                            unk_id=2, bos_id=-1)

    # tokenizer.json families converted by transformers from the sentencepiece model, as the
    # Hugging Face directories ship them.
    for name, cls, model, fname, langs in [
        ("t5", tf.T5Tokenizer, spms["unigram_bytes"], "spiece.model", [(None, None)]),
        ("nllb", tf.NllbTokenizer, spms["bpe"], "sentencepiece.bpe.model", [("eng_Latn", "fra_Latn"), ("rus_Cyrl", "zho_Hans")]),
        ("mbart50", tf.MBart50Tokenizer, spms["unigram_bytes"], "sentencepiece.bpe.model", [("en_XX", "fr_XX"), ("ru_RU", "zh_CN")]),
        ("mbart", tf.MBartTokenizer, spms["unigram_bytes"], "sentencepiece.bpe.model", [("en_XX", "ro_RO"), ("ru_RU", "zh_CN")]),
        ("pegasus", tf.PegasusTokenizer, pegasus_spm, "spiece.model", [(None, None)]),
    ]:
        d = os.path.join(tmp, name)
        os.makedirs(d)
        shutil.copy(model, os.path.join(d, fname))
        out = os.path.join(ROOT, name)
        os.makedirs(out, exist_ok=True)
        cases = {}
        for s_lang, t_lang in langs:
            kw = {} if s_lang is None else {"src_lang": s_lang, "tgt_lang": t_lang}
            if name == "nllb":
                # As the published NLLB tokenizer.json has them: the language codes are added
                # special tokens (converting a bare sentencepiece model does not add them).
                from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

                kw["additional_special_tokens"] = FAIRSEQ_LANGUAGE_CODES
            tok = cls.from_pretrained(d, **kw)
            key = "default" if s_lang is None else f"{s_lang}-{t_lang}"
            cases[key] = family_cases(tok, src, tgt, rng)
            if s_lang is not None:
                cases[key]["forced_bos"] = tok.convert_tokens_to_ids(t_lang)
        if name == "t5":
            # Decoding with transformers' clean_up_tokenization (a Unigram model, where
            # transformers 5 applies it).
            clean = cls.from_pretrained(d, clean_up_tokenization_spaces=True)
            cases["clean_up"] = family_cases(clean, src, tgt, rng)
        tok.save_pretrained(os.path.join(tmp, name + "_saved"))
        shutil.copy(os.path.join(tmp, name + "_saved", "tokenizer.json"), out)
        shutil.copy(os.path.join(tmp, name + "_saved", "tokenizer_config.json"), out)
        write_json(os.path.join(out, "expected.json"), cases)

    # BART: byte-level BPE (vocab.json + merges.txt), <s> ... </s>.
    d = os.path.join(tmp, "bart")
    os.makedirs(d)
    data = json.load(open(bytebpe, encoding="utf-8"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for t in data["model"]["vocab"]:
        if t != "<|endoftext|>":
            vocab.setdefault(t, len(vocab))
    vocab["<mask>"] = len(vocab)
    write_json(os.path.join(d, "vocab.json"), vocab)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in data["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    tok = tf.BartTokenizer.from_pretrained(d)
    out = os.path.join(ROOT, "bart")
    os.makedirs(out, exist_ok=True)
    tok.save_pretrained(os.path.join(tmp, "bart_saved"))
    shutil.copy(os.path.join(tmp, "bart_saved", "tokenizer.json"), out)
    shutil.copy(os.path.join(tmp, "bart_saved", "tokenizer_config.json"), out)
    write_json(os.path.join(out, "expected.json"), {"default": family_cases(tok, src, tgt, rng)})


def main():
    with tempfile.TemporaryDirectory() as tmp:
        spms = make_spm(tmp)
        bytebpe = make_bytebpe(tmp)
        make_whisper(bytebpe)
        make_families(tmp, spms, bytebpe)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
