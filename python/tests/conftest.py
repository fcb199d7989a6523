"""Fixture paths and readers shared by the tests: the repository's committed model fixtures
and the reference outputs made by tools/ (no reference library is imported here)."""

import json
import shutil
import struct
import wave
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def read_safetensors(path):
    """The tensors of a safetensors file as numpy arrays (the format: an 8-byte header length,
    a JSON header, the raw little-endian data)."""
    data = Path(path).read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = data[8 + size :]
    dtypes = {"I64": "<i8", "F64": "<f8", "F32": "<f4"}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(body[start:end], dtype=dtypes[info["dtype"]]).reshape(
            info["shape"]
        )
    return out


def read_wav(path):
    """16-bit PCM mono samples as float32 in [-1, 1) (x / 32768, as tessel reads them)."""
    with wave.open(str(path), "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000
        frames = w.readframes(w.getnframes())
    return np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0


@pytest.fixture
def decoding_dir(tmp_path):
    """A complete copy of a tests/decoding/<name>/hf model (Marian gets the SentencePiece
    model its source side needs, as pipeline/tests/suite/translate_golden.rs gives it)."""

    def make(name):
        out = tmp_path / name
        shutil.copytree(TESTS / "decoding" / name / "hf", out)
        if name == "marian":
            shutil.copy(ROOT / "text/tests/fixtures/spm/unigram.model", out / "source.spm")
        return out

    return make


def decoding_expected(name):
    return json.loads((TESTS / "decoding" / name / "expected.json").read_text())


def vocabulary_of(model_dir):
    """Id -> token of a tests/decoding model: Marian's vocab.json, or NLLB's tokenizer.json
    (its BPE vocabulary, then its added tokens)."""
    model_dir = Path(model_dir)
    if (model_dir / "vocab.json").is_file():
        vocab = json.loads((model_dir / "vocab.json").read_text())
    else:
        tok = json.loads((model_dir / "tokenizer.json").read_text())
        vocab = dict(tok["model"]["vocab"])
        vocab.update({a["content"]: a["id"] for a in tok["added_tokens"]})
    return {i: t for t, i in vocab.items()}
