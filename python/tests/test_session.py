"""tessel.Model and tessel.Session, the token-level API, against the reference outputs the
Rust goldens use (tools/make_translation_golden.py and tools/make_whisper_golden.py, from
transformers in float64): teacher-forced logits, greedy and beam-4 tokens."""

import gc

import numpy as np
import pytest

import tessel
from conftest import TESTS, read_safetensors

# The reference forced the target language after the decoder start (mBART): a prefix here.
FORCED = {"marian": 0, "t5_v1_1": 0, "mbart": 1}


def close_logits(session, expected):
    """Each teacher-forced step's logits within 1e-4 of the logit scale (the Rust goldens'
    bound), as read-only float32 arrays over the arena."""
    scale = np.abs(expected["logits"]).max()
    vocab = session.model.config["tgt_vocab"]
    for token, want in zip(expected["decoder_input_ids"].tolist(), expected["logits"]):
        got = session.decode_step([token])
        assert got.shape == (1, vocab) and got.dtype == np.float32
        assert not got.flags.writeable
        assert np.abs(got[0, : want.shape[0]] - want).max() <= 1e-4 * scale


@pytest.mark.parametrize("name", sorted(FORCED))
def test_a_session_decodes_as_transformers(name):
    expected = read_safetensors(TESTS / "translation" / name / "expected.safetensors")
    model = tessel.Model(str(TESTS / "translation" / name / "hf"))
    session = model.session(intra_threads=1)
    session.encode(expected["src_ids"].tolist())
    assert session.source_len == len(expected["src_ids"])
    close_logits(session, expected)
    assert session.position == len(expected["decoder_input_ids"])
    for beam, key in [(1, "greedy_tokens"), (4, "beam4_tokens")]:
        want = expected[key].tolist()
        prefix = want[: 1 + FORCED[name]]
        hyps = session.generate(beam, len(want) - len(prefix), prefix=prefix)
        assert len(hyps) >= 1
        tokens, score = hyps[0]
        assert prefix[1:] + tokens == want[1:], (name, beam)
        assert score < 0


def test_a_whisper_session_encodes_audio():
    expected = read_safetensors(TESTS / "whisper" / "tiny_like_80" / "expected.safetensors")
    model = tessel.Model(str(TESTS / "whisper" / "tiny_like_80" / "hf"))
    session = model.session()
    session.encode_audio(expected["mel"])
    close_logits(session, expected)
    prompt = expected["prompt"].tolist()
    want = expected["greedy_tokens"].tolist()
    (tokens, _), *_ = session.generate(1, len(want) - len(prompt), prefix=prompt)
    assert prompt + tokens == want


def test_a_logits_array_keeps_its_session_and_sees_the_next_call():
    """The array is a view: the next step overwrites it, and it holds the session (the arena
    stays valid after the last Python reference to the session is gone)."""
    expected = read_safetensors(TESTS / "translation" / "t5_v1_1" / "expected.safetensors")
    session = tessel.Model(str(TESTS / "translation" / "t5_v1_1" / "hf")).session(1)
    session.encode(expected["src_ids"].tolist())
    first = session.prefill([0, 5])
    kept = first.copy()
    session.reset_decoder()
    assert session.logits.shape == (0, kept.shape[1])
    session.decode_step([0])
    assert not np.array_equal(first, kept)
    del session
    gc.collect()
    assert np.isfinite(first).all()


def test_bad_calls_raise_typed_errors():
    model = tessel.Model(str(TESTS / "translation" / "marian" / "hf"), max_beam=2)
    session = model.session(1)
    with pytest.raises(tessel.InputError, match="encode"):
        session.decode_step([1])
    session.encode([5, 6, 0])
    with pytest.raises(tessel.InputError):
        session.decode_step([1, 2, 3])
    with pytest.raises(tessel.InputError):
        session.decode_step([10**6])
    with pytest.raises(tessel.InputError):
        session.encode([])
    with pytest.raises(tessel.InputError):
        session.encode_audio(np.zeros((80, 10), dtype=np.float32))
    with pytest.raises(tessel.LoadError):
        tessel.Model(str(TESTS / "no such model"))
