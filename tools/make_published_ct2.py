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

For the rows of INT8_ROWS it also converts the directory as `ct2-transformers-converter
--quantization int8` does and writes ct2_int8.json: its variables, a quantised one described
as the float32 conversion's variable of the same name (`parts`) then `"quantize": "int8_rows"`
(CTranslate2's `ModelSpec._quantize`: per row amax, scale 127 / amax, value · scale rounded
half to even by `np.rint`, all in float32; `quantize_rows` redoes it and the script checks its
bytes against the converter's), its `weight_scale` as `"scale_of"` that variable, the rest as
in ct2.json (whose header, config, vocabularies and aliases the int8 conversion shares: the
script checks they are the same); and CTranslate2's runs on it with compute_type int8 and
float32 (the int8 weights dequantised): logits at expected.json's columns at every
teacher-forced step (Whisper: the step after the prompt; its `generate` applies its rules to
shorter and longer prompts), its greedy tokens and their top-2 margins.

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
# The rows given an int8 conversion (ct2_int8.json): Marian, BART, NLLB's M2M100 (a 256,206-row
# vocabulary), T5 classic and v1.1, Whisper (see tests/published/README.md).
INT8_ROWS = ("opus-mt-en-de", "nllb-200-distilled-600M", "bart-large-cnn", "t5-small",
             "flan-t5-small", "whisper-tiny")
# Teacher-forced steps of CTranslate2's int8 run recorded (all of expected.json's).
INT8_STEPS = 9
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
    if kind == "pegasus":
        # PegasusTokenizer: pad, eos, the two masks, <unk_2> to <unk_102>, then the
        # SentencePiece pieces shifted by 103 (its <unk> at 105).
        special = {0: "<pad>", 1: "</s>", 2: "<mask_1>", 3: "<mask_2>", 105: "<unk>"}
        special.update({k + 2: f"<unk_{k}>" for k in range(2, 103)})
        return StandIn(vocab, special, eos=1, unk=105, pad=0)
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


def vocabularies_of(out):
    """(source tokens, target tokens) of a converted text model."""
    def read(name):
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    if os.path.isfile(os.path.join(out, "source_vocabulary.json")):
        return read("source_vocabulary.json"), read("target_vocabulary.json")
    shared = read(next(f for f in sorted(os.listdir(out)) if f.endswith("vocabulary.json")))
    return shared, shared


def top_two(logits):
    order = np.argsort(-logits, kind="stable")[:2]
    return int(order[0]), float(logits[order[0]] - logits[order[1]])


def ctranslate2_runs(out, row, config, compute_type, steps_kept):
    """CTranslate2 run with `compute_type` on a conversion: its logits at the teacher-forced
    steps of expected.json from `first_step` (text: the first `steps_kept`; Whisper: the step
    after the prompt), at expected.json's columns in its order, 7 digits; its greedy tokens
    (decoder start included) and, per generated token, its top-1 minus top-2 logit."""
    with open(os.path.join(row, "expected.json")) as f:
        expected = json.load(f)
    forced, prompt = expected["decoder_input_ids"], expected["prompt"]
    total = len(expected["greedy_tokens"])
    if config["model_type"] == "whisper":
        model = ctranslate2.models.Whisper(out, device="cpu", compute_type=compute_type,
                                           intra_threads=1)
        mel = gen.generate(expected["mel"], expected["mel_seed"])
        encoded = model.encode(ctranslate2.StorageView.from_array(mel[None]))
        rules = dict(beam_size=1, return_logits_vocab=True, suppress_blank=False,
                     suppress_tokens=[])

        def run(prefix, new):
            # `max_length` does not count the prompt one for one: ask for more, keep `new`.
            r = model.generate(encoded, [prefix], max_length=len(prefix) + new + 8, **rules)[0]
            assert len(r.sequences_ids[0]) >= new, "Whisper stopped early"
            return [int(t) for t in r.sequences_ids[0][:new]], [
                np.array(l).reshape(-1) for l in r.logits[0][:new]]

        # Whisper's generate returns the logits of generated tokens only, and applies its rules
        # to prompts short of the task tokens (timestamps) and past them: only the step after
        # the whole prompt is the decoder's own.
        first = len(prompt) - 1
        tokens, along = run(prompt, total - len(prompt))
        forced_logits = along[:1]
    else:
        source_vocab, target_vocab = vocabularies_of(out)
        ids, repeated = {}, set()
        for i, t in enumerate(target_vocab):
            if t in ids:
                repeated.add(t)
            ids.setdefault(t, i)
        translator = ctranslate2.Translator(out, device="cpu", compute_type=compute_type,
                                            intra_threads=1)
        source = [source_vocab[i] for i in expected["src_ids"]]

        def run(prefix, new):
            # CTranslate2 starts the decoder itself: the prefix is past the start token.
            words = [target_vocab[i] for i in prefix[1:]]
            r = translator.translate_batch(
                [source], target_prefix=[words] if words else None, beam_size=1,
                max_decoding_length=len(words) + new, min_decoding_length=len(words) + new,
                return_logits_vocab=True, end_token=[])[0]
            new_tokens = r.hypotheses[0][len(words):]
            assert not repeated.intersection(new_tokens), "a token of two ids"
            return [ids[t] for t in new_tokens], [
                np.array(l).reshape(-1) for l in r.logits[0]]

        first = 0
        forced_logits = run(forced[:steps_kept], 1)[1][:steps_kept]
        tokens, along = run(prompt, total - len(prompt))
        along = along[len(prompt) - 1:]
    assert len(tokens) == total - len(prompt) and len(along) == len(tokens)
    margins = []
    for token, logits in zip(tokens, along):
        top, margin = top_two(logits)
        assert top == token, "greedy token is not the argmax"
        margins.append(margin)
    short = lambda x: float("%.7g" % x)  # noqa: E731
    return {"compute_type": compute_type, "first_step": first,
            "logits": [[short(logits[c]) for c, _ in expected["logits"][first + s]]
                       for s, logits in enumerate(forced_logits)],
            "greedy_tokens": prompt + tokens,
            "greedy_margins": [short(m) for m in margins]}


def quantize_rows(values):
    """CTranslate2's int8 quantisation (`ModelSpec._quantize`, quantization "int8"), step by
    step in float32: per row (the first axis; a convolution's other axes flattened) the
    largest magnitude, 127 where the row is zero, at least 127 / float32 max; the scale
    127 / amax; every value times its row's scale, rounded half to even (`np.rint`)."""
    value = np.array(values, dtype=np.float32)
    value = value.reshape(value.shape[0], -1)
    amax = np.amax(np.absolute(value), axis=1)
    amax[amax == 0] = 127.0
    amax = np.maximum(amax, np.float32(127) / np.finfo(np.float32).max)
    scale = 127.0 / amax
    assert scale.dtype == np.float32 and amax.dtype == np.float32
    value *= np.expand_dims(scale, 1)
    return np.rint(value).astype(np.int8), scale


def source_values(parts, tensors):
    """The float32 elements a `parts` list names (float16 sources widened exactly)."""
    return np.concatenate([np.zeros(b - a, dtype=np.float32) if n is None else
                           np.ascontiguousarray(tensors[n]).reshape(-1)[a:b].astype(np.float32)
                           for n, a, b in parts])


def int8_records(variables, f32_records, tensors, index, config):
    """The int8 conversion's variables: a quantised weight is the float32 variable of the same
    name quantised (`"quantize": "int8_rows"` over its `parts`), its `<name>_scale` the
    per-row scales of that quantisation (`"scale_of"`); every other variable is described as
    in the float32 conversion. Each is checked against the converter's bytes."""
    by_name = {r["name"]: r for r in f32_records}
    names = {v[0] for v in variables}
    scales, records = {}, []
    for var_name, shape, dtype, data in variables:
        if DTYPES[dtype][0] == "int8" and var_name + "_scale" in names:
            parts = by_name[var_name]["parts"]
            quantized, scale = quantize_rows(source_values(parts, tensors).reshape(shape))
            assert quantized.tobytes() == data, f"{var_name}: quantisation differs"
            scales[var_name + "_scale"] = (var_name, scale.tobytes())
    for var_name, shape, dtype, data in variables:
        formula = None
        if var_name + "_scale" in scales:
            entry = {"parts": by_name[var_name]["parts"], "quantize": "int8_rows"}
        elif var_name in scales:
            base, scale = scales[var_name]
            assert scale == data, f"{var_name}: scales differ"
            entry = {"scale_of": base}
        else:
            entry = recipe(var_name, shape, dtype, data, index, config)
            formula = entry.pop("formula_bytes", None)
            if formula is None:
                check = {"dtype": DTYPES[dtype][0], **entry}
                assert rebuild(check, tensors) == data, f"{var_name}: recipe does not rebuild"
        records.append({"name": var_name, "shape": shape, "dtype": DTYPES[dtype][0], **entry,
                        "sha256": sha(formula if formula is not None else data)})
    return records


def build_int8(name, row, config, hf, tmp, tensors, index, f32_records, f32_file):
    """Writes the row's ct2_int8.json: the `--quantization int8` conversion of the same
    directory, and what CTranslate2 computes on it with int8 and float32 compute."""
    out = os.path.join(tmp, "ct2_int8")
    Converter(hf, stand_in(config)).convert(out, quantization="int8")
    version, spec, revision, variables, aliases = read_model_bin(os.path.join(out, "model.bin"))
    with open(os.path.join(out, "config.json")) as f:
        ct2_config = json.load(f)
    vocabularies = {f: vocabulary_record(os.path.join(out, f))
                    for f in sorted(os.listdir(out)) if f.endswith("vocabulary.json")}
    # The header, config, vocabularies and aliases are the float32 conversion's (ct2.json).
    assert (version, spec, revision, ct2_config, vocabularies, aliases) == f32_file, \
        "the int8 conversion's files differ from the float32 conversion's beyond model.bin"
    records = int8_records(variables, f32_records, tensors, index, config)
    runs = [ctranslate2_runs(out, row, config, "int8", INT8_STEPS)]
    runs.append(ctranslate2_runs(out, row, config, "float32", INT8_STEPS))
    record = {"converter": f"ctranslate2 {ctranslate2.__version__}", "quantization": "int8",
              "files": sorted(os.listdir(out)), "ctranslate2": runs, "variables": records}
    with open(os.path.join(row, "ct2_int8.json"), "w") as f:
        # One line a variable and a run: the logits make up half the file.
        compact = lambda v: json.dumps(v, separators=(",", ":"))  # noqa: E731
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {compact(v)}" for k, v in record.items()
                                    if k not in ("ctranslate2", "variables")))
        for key in ("ctranslate2", "variables"):
            rows = ",\n  ".join(map(compact, record[key]))
            f.write(f",\n {json.dumps(key)}: [\n  {rows}\n ]")
        f.write("\n}\n")
    quantized = sum(1 for r in records if "quantize" in r)
    return (f"{name} int8: {len(records)} variables, {quantized} quantised; CTranslate2 int8 "
            f"greedy {runs[0]['greedy_tokens']} margins {runs[0]['greedy_margins']}; "
            f"float32 greedy {runs[1]['greedy_tokens']}")


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
        if name in INT8_ROWS:
            int8 = build_int8(name, row, config, hf, tmp, tensors, index, records,
                              (version, spec, revision, ct2_config, vocabularies, aliases))
            print(int8)
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
