#!/usr/bin/env python3
"""Writes tests/published/<row>/ct2.json: how the CTranslate2 conversion of a published-layout
row (tools/make_published_golden.py) is rebuilt at test time, byte for byte, from the weights the
Rust tests regenerate.

For each row: the Hugging Face directory is regenerated from manifest.json
(tools/published_weights.py), converted by CTranslate2's own `TransformersConverter` as
`ct2-transformers-converter --model DIR --output_dir OUT` converts it (no quantization: the
checkpoint's own dtype), with a stand-in tokenizer, since the published tokenizer files cannot
be fetched here: every id is named `w<id>` but the special tokens (each family's, at their
published ids, Whisper's language and timestamp tokens included). Then every variable of the
converter's `model.bin` is described by how it derives from the regenerated tensors:

  parts       elements [start, end) of Hugging Face tensors (row-major), concatenated (fused
              q/k/v projections and their biases; Marian's tables and logits bias without the
              padding token; learned positions past their offset); a part named null is that
              many zeros (Whisper's key projections have no bias)
  inline      the little-endian bytes, for small variables (attributes, scalars)
  positions   a sinusoidal table by formula (`marian`: float64, rounded to float32, then to
              float16 in a float16 checkpoint; `m2m100`:
              `transformers`' float32 angles, listed `frequencies`, their sines and cosines
              correctly rounded); the script checks the formula against the converter's table
              and records how many entries differ and by at most how many ulps (0 where the
              formula is exact)

with the SHA-256 of the bytes each rebuilds, its aliases, the converter's `config.json` and
its vocabulary files (token lists: `w<id>` but the listed specials and a timestamp range).
Before writing, the script rebuilds every variable from its recipe and checks the digests.
It also runs CTranslate2 itself on the conversion (text models) and records its logits at the
first step the reference forces, at expected.json's columns, and whether they are
transformers': where they are not, the conversion is not the checkpoint (the converter's T5
path under transformers 5 scales the outputs of v1.1-layout models, see tests/CONFORMANCE.md),
and the Rust test holds tessel to CTranslate2 on it instead.

Usage: python3 tools/make_published_ct2.py [row ...]   (torch, transformers, ctranslate2,
safetensors, numpy; checked with torch 2.15.0, transformers 5.24.0, ctranslate2 4.8.5).
"""

import hashlib
import json
import os
import struct
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import save_file

import ctranslate2
from ctranslate2.converters.transformers import TransformersConverter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published_weights as gen  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "published")
INLINE_MAX = 64
DTYPES = {0: ("float32", np.float32), 1: ("int8", np.int8), 2: ("int16", np.int16),
          3: ("int32", np.int32), 4: ("float16", np.float16), 5: ("bfloat16", None)}

WHISPER_LANGUAGES = [
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"]
WHISPER_TAIL = ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                "<|nospeech|>", "<|notimestamps|>"]


class StandIn:
    """The parts of a `transformers` tokenizer the converter's loaders read."""

    def __init__(self, size, special, bos=None, eos=None, unk=None, pad=None, additional=()):
        self.tokens = [special.get(i, f"w{i}") for i in range(size)]
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        name = lambda i: None if i is None else self.tokens[i]  # noqa: E731
        self.bos_token, self.eos_token = name(bos), name(eos)
        self.unk_token, self.pad_token = name(unk), name(pad)
        self.unk_token_id = unk
        self.additional_special_tokens = list(additional)
        self.special_tokens_map = {"additional_special_tokens": list(additional)}

    def get_vocab(self):
        return dict(self.ids)

    def convert_ids_to_tokens(self, i):
        return self.tokens[i]

    def convert_tokens_to_ids(self, token):
        return self.ids[token]


def stand_in(config):
    """The stand-in tokenizer of a row's family, its specials at their published ids."""
    kind, vocab = config["model_type"], config["vocab_size"]
    if kind == "marian":
        pad = config["pad_token_id"]
        return StandIn(vocab, {0: "</s>", 1: "<unk>", pad: "<pad>"}, eos=0, unk=1, pad=pad)
    if kind in ("bart", "mbart", "m2m_100"):
        special = {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>"}
        return StandIn(vocab, special, bos=0, eos=2, unk=3, pad=1)
    if kind in ("t5", "mt5"):
        # The published SentencePiece vocabulary, then 100 sentinels from <extra_id_99> down;
        # the converter names the rows past them <extra_id_N> again.
        pieces = 250000 if kind == "mt5" else 32000
        special = {0: "<pad>", 1: "</s>", 2: "<unk>"}
        special.update({pieces + k: f"<extra_id_{99 - k}>" for k in range(100)})
        return StandIn(min(vocab, pieces + 100), special, eos=1, unk=2, pad=0)
    if kind == "whisper":
        multilingual = vocab >= 51865
        eot = 50257 if multilingual else 50256
        languages = WHISPER_LANGUAGES[: 100 if vocab == 51866 else 99]
        names = ["<|startoftranscript|>"] + [f"<|{c}|>" for c in languages] + WHISPER_TAIL
        special = {eot: "<|endoftext|>"}
        special.update({eot + 1 + k: n for k, n in enumerate(names)})
        size = eot + 1 + len(names)
        return StandIn(size, special, bos=eot, eos=eot, unk=eot,
                       additional=[special[i] for i in sorted(special)])
    raise SystemExit(f"no stand-in tokenizer for model_type {kind}")


class Converter(TransformersConverter):
    def __init__(self, path, tokenizer):
        super().__init__(path)
        self.stand_in = tokenizer

    def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
        return self.stand_in


def regenerate(row, out):
    """The row's Hugging Face directory in `out`; its tensors by name."""
    with open(os.path.join(row, "manifest.json")) as f:
        manifest = json.load(f)
    tensors = {}
    for entry in manifest["tensors"]:
        array = gen.generate(entry, manifest["seed"])
        if entry.get("dtype") == "F16":
            array = array.astype(np.float16)
        tensors[entry["name"]] = array
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    for name in ("config.json", "generation_config.json"):
        with open(os.path.join(row, name)) as f, open(os.path.join(out, name), "w") as g:
            g.write(f.read())
    return tensors


def read_model_bin(path):
    """(version, spec, revision, [(name, shape, dtype id, bytes)], [(alias, target)])."""
    data = open(path, "rb").read()
    at = 0

    def take(fmt):
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return values

    def string():
        nonlocal at
        (n,) = take("H")
        text = data[at:at + n - 1].decode()
        at += n
        return text

    (version,) = take("I")
    spec = string()
    (revision,) = take("I")
    (count,) = take("I")
    variables = []
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        shape = list(take("I" * rank)) if rank else []
        (dtype,) = take("B")
        (size,) = take("I")
        variables.append((name, shape, dtype, data[at:at + size]))
        at += size
    (n_aliases,) = take("I")
    aliases = [(string(), string()) for _ in range(n_aliases)]
    assert at == len(data), "trailing bytes in model.bin"
    return version, spec, revision, variables, aliases


def sha(data):
    return hashlib.sha256(data).hexdigest()


def ulps(a, b):
    bits = np.int16 if a.dtype == np.float16 else np.int32
    ia, ib = a.view(bits).astype(np.int64), b.view(bits).astype(np.int64)
    return np.abs(ia - ib)


def marian_positions(rows, d):
    """transformers' MarianSinusoidalPositionalEmbedding: float64, then float32."""
    pos = np.arange(rows, dtype=np.float64)[:, None]
    j = np.arange(d)[None, :]
    angle = pos / np.power(10000, 2 * (j // 2) / d)
    half = d // 2 if d % 2 == 0 else d // 2 + 1
    table = np.zeros((rows, d), dtype=np.float32)
    table[:, :half] = np.sin(angle[:, 0::2])
    table[:, half:] = np.cos(angle[:, 1::2])
    return table


def m2m100_frequencies(d):
    half = d // 2
    step = np.float32(np.log(10000) / (half - 1))
    return torch.exp(torch.arange(half, dtype=torch.int64).float() * -float(step)).numpy()


def m2m100_positions(first, rows, d, frequencies, padding=None):
    """transformers' M2M100 table from position `first`: float32 angles position × frequency,
    their sine and cosine correctly rounded (transformers' own differ by an ulp here and there);
    the padding position's row zero."""
    positions = np.arange(first, first + rows, dtype=np.float32)[:, None]
    angle = (positions * frequencies[None, :]).astype(np.float32).astype(np.float64)
    table = np.concatenate([np.sin(angle), np.cos(angle)], axis=1).astype(np.float32)
    if padding is not None and first <= padding < first + rows:
        table[padding - first] = 0.0
    return table


def recipe(name, shape, dtype, data, index, config):
    """How variable `name` derives from the regenerated tensors."""
    numpy_dtype = DTYPES[dtype][1]
    if data in index:
        return {"parts": [index[data]]}
    if len(data) <= INLINE_MAX * 4:
        return {"inline": data.hex()}
    if shape and numpy_dtype is not None:
        for k in (3, 2):
            if shape[0] % k:
                continue
            block = len(data) // k
            pieces = [data[i * block:(i + 1) * block] for i in range(k)]
            items = block // np.dtype(numpy_dtype).itemsize
            zero = bytes(block)
            if all(p in index or p == zero for p in pieces):
                return {"parts": [index[p] if p in index else [None, 0, items]
                                  for p in pieces]}
    if name.endswith("position_encodings/encodings") and len(shape) == 2:
        rows, d = shape
        table = np.frombuffer(data, dtype=numpy_dtype).reshape(rows, d)
        if config["model_type"] == "marian":
            formula, kind = marian_positions(rows, d).astype(numpy_dtype), {"kind": "marian"}
        else:
            frequencies = m2m100_frequencies(d)
            padding = config.get("pad_token_id")
            formula = m2m100_positions(2, rows, d, frequencies, padding)
            kind = {"kind": "m2m100", "first": 2, "padding": padding,
                    "frequencies": [int(x) for x in frequencies.view(np.uint32)]}
        distance = ulps(formula, table)
        kind.update(differ=int((distance > 0).sum()), max_ulps=int(distance.max()),
                    converter_sha256=sha(data))
        assert distance.max() <= 1, f"{name}: the formula is {distance.max()} ulps off"
        return {"positions": kind, "formula_bytes": formula.tobytes()}
    raise SystemExit(f"{name} {shape}: no recipe")


def index_tensors(tensors):
    """bytes → (name, first element, end element) for every tensor, every matrix but its last
    row and every tensor but its last element (Marian's tables and logits bias without the
    padding token)."""
    index = {}
    for name, array in tensors.items():
        flat = np.ascontiguousarray(array).reshape(-1)
        n = flat.size
        index.setdefault(flat.tobytes(), [name, 0, n])
        if array.ndim == 2:
            cols = array.shape[1]
            index.setdefault(flat[: n - cols].tobytes(), [name, 0, n - cols])
            for offset in (1, 2):
                index.setdefault(flat[offset * cols:].tobytes(), [name, offset * cols, n])
        index.setdefault(flat[: n - 1].tobytes(), [name, 0, n - 1])
    return index


def rebuild(entry, tensors):
    if "inline" in entry:
        return bytes.fromhex(entry["inline"])
    size = np.dtype(dict(DTYPES.values())[entry["dtype"]]).itemsize
    return b"".join(bytes((b - a) * size) if n is None else
                    np.ascontiguousarray(tensors[n]).reshape(-1)[a:b].tobytes()
                    for n, a, b in entry["parts"])


def vocabulary_record(path):
    with open(path) as f:
        tokens = json.load(f)
    special = [[i, t] for i, t in enumerate(tokens) if t != f"w{i}"]
    timestamps = [i for i, t in special if t.startswith("<|") and t[2:3].isdigit()]
    record = {"size": len(tokens), "sha256": sha("\n".join(tokens).encode())}
    if timestamps:
        first = timestamps[0]
        assert timestamps == list(range(first, len(tokens)))
        assert all(tokens[i] == "<|%.2f|>" % ((i - first) * 0.02) for i in timestamps)
        record["timestamps_from"] = first
        special = [[i, t] for i, t in special if i < first]
    record["special"] = special
    return record


def ctranslate2_step0(out, row, config):
    """CTranslate2's own logits at the first teacher-forced step, at expected.json's columns,
    and whether they are transformers' (within the Rust test's bound, 1e-4 of the scale).
    `None` for Whisper (its generate takes features, not a target prefix)."""
    if config["model_type"] == "whisper":
        return None
    with open(os.path.join(row, "expected.json")) as f:
        expected = json.load(f)
    vocab_file = next(f for f in sorted(os.listdir(out)) if f.endswith("vocabulary.json"))
    with open(os.path.join(out, vocab_file)) as f:
        target_vocab = json.load(f)
    if os.path.isfile(os.path.join(out, "source_vocabulary.json")):
        with open(os.path.join(out, "source_vocabulary.json")) as f:
            source_vocab = json.load(f)
        with open(os.path.join(out, "target_vocabulary.json")) as f:
            target_vocab = json.load(f)
    else:
        source_vocab = target_vocab
    translator = ctranslate2.Translator(out, device="cpu", compute_type="float32")
    source = [source_vocab[i] for i in expected["src_ids"]]
    # CTranslate2 starts the decoder itself: the prefix is the prompt past its start token.
    prefix = [target_vocab[i] for i in expected["prompt"][1:]]
    result = translator.translate_batch(
        [source], target_prefix=[prefix] if prefix else None, beam_size=1,
        max_decoding_length=len(prefix) + 1, return_logits_vocab=True, end_token=[])
    step = len(prefix)
    logits = np.array(result[0].logits[0][step]).reshape(-1)
    columns = expected["logits"][step]
    bound = 1e-4 * max(expected["logit_scale"], 1.0)
    worst = max(abs(float(logits[c]) - v) for c, v in columns)
    return {"step": step, "columns": [[c, float(logits[c])] for c, _ in columns],
            "transformers_distance": worst, "matches_transformers": worst <= bound}


def build(name):
    row = os.path.join(ROOT, name)
    with open(os.path.join(row, "config.json")) as f:
        config = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        hf, out = os.path.join(tmp, "hf"), os.path.join(tmp, "ct2")
        os.makedirs(hf)
        tensors = regenerate(row, hf)
        Converter(hf, stand_in(config)).convert(out)
        version, spec, revision, variables, aliases = read_model_bin(
            os.path.join(out, "model.bin"))
        index = index_tensors(tensors)
        records = []
        for var_name, shape, dtype, data in variables:
            entry = recipe(var_name, shape, dtype, data, index, config)
            formula = entry.pop("formula_bytes", None)
            entry = {"name": var_name, "shape": shape, "dtype": DTYPES[dtype][0], **entry,
                     "sha256": sha(formula if formula is not None else data)}
            if formula is None:
                assert rebuild(entry, tensors) == data, f"{var_name}: recipe does not rebuild"
            records.append(entry)
        with open(os.path.join(out, "config.json")) as f:
            ct2_config = json.load(f)
        vocabularies = {f: vocabulary_record(os.path.join(out, f))
                        for f in sorted(os.listdir(out)) if f.endswith("vocabulary.json")}
        files = sorted(os.listdir(out))
        runtime = ctranslate2_step0(out, row, config)
    record = {"converter": f"ctranslate2 {ctranslate2.__version__}",
              "files": files, "binary_version": version, "spec": spec, "revision": revision,
              "config": ct2_config, "vocabularies": vocabularies, "aliases": aliases,
              "ctranslate2": runtime, "variables": records}
    with open(os.path.join(row, "ct2.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    kinds = {}
    for r in records:
        key = next(k for k in ("parts", "inline", "positions") if k in r)
        kinds[key] = kinds.get(key, 0) + 1
    positions = [r["positions"] for r in records if "positions" in r]
    print(f"{name}: {len(records)} variables {kinds}, {len(aliases)} aliases, files {files}"
          + "".join(f"; positions {p['kind']}: {p['differ']} entries {p['max_ulps']} ulp off"
                    for p in positions)
          + ("" if runtime is None else
             f"; CTranslate2 step {runtime['step']} {runtime['transformers_distance']:.3g} from "
             f"transformers ({'matches' if runtime['matches_transformers'] else 'DIFFERS'})"))


def main():
    names = sys.argv[1:] or sorted(
        d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "manifest.json")))
    for name in names:
        build(name)


if __name__ == "__main__":
    main()
