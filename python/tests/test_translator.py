"""tessel.Translator against CTranslate2's translate_batch and transformers' pipeline, on the
committed random-weight fixtures (their reference outputs were made by tools/
make_translation_golden.py and tools/make_decoding_golden.py with the reference libraries)."""

import json
import os
import pickle
import time

import pytest

import tessel
from conftest import TESTS, decoding_expected, read_safetensors, vocabulary_of

# tests/translation families with a CTranslate2 conversion, and whether the reference forced
# a target-language (or <s>) token after the decoder start, given to CTranslate2 as a prefix.
CT2_FAMILIES = {
    "marian": False,
    "marian_untied": False,
    "bart": True,
    "mbart": True,
    "m2m100": True,
    "t5": False,
    "t5_tied": False,
    "t5_v1_1": False,
}


def close_scores(got, want, tokens):
    """Within 2e-5 per summed log-probability, relative to the score's size (as the Rust
    decoding goldens)."""
    assert len(got) == len(want)
    for g, w, t in zip(got, want, tokens):
        assert abs(g - w) <= 2e-5 * max(len(t), 1) * max(abs(w), 1.0), (g, w)


@pytest.mark.parametrize("name", sorted(CT2_FAMILIES))
@pytest.mark.parametrize("beam", [1, 4])
def test_ctranslate2_directories_translate_tokens_as_ctranslate2(name, beam):
    """A CTranslate2 directory without tokenizer files: tokens through its vocabulary."""
    ct2_dir = TESTS / "translation" / name / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    expected = read_safetensors(TESTS / "translation" / name / "expected.safetensors")
    want = expected["ct2_greedy_tokens" if beam == 1 else "ct2_beam4_tokens"].tolist()
    source = [tokens[i] for i in expected["src_ids"].tolist()]
    prefix = [[tokens[want[1]]]] if CT2_FAMILIES[name] else None
    translator = tessel.Translator(str(ct2_dir))
    result = translator.translate_batch(
        [source], target_prefix=prefix, beam_size=beam, max_decoding_length=10,
        return_scores=True,
    )[0]
    # The reference's ids start with the decoder start token, which no hypothesis holds.
    assert result.hypotheses == [[tokens[i] for i in want[1:]]]
    assert len(result.scores) == 1 and result.scores[0] < 0


def ct2_kwargs(opts, tokens):
    """tools/make_decoding_golden.py's `ct2_run` keyword arguments for a case's options."""
    kw = dict(
        beam_size=opts.get("beam", 1),
        max_decoding_length=opts.get("max_new_tokens", 20),
        return_scores=True,
        length_penalty=opts.get("length_penalty", 1.0),
        repetition_penalty=opts.get("repetition_penalty", 1.0),
        no_repeat_ngram_size=opts.get("no_repeat_ngram_size", 0),
        min_decoding_length=max(opts.get("min_length", 0) - 1, 0),
        num_hypotheses=opts.get("num_hypotheses", 1),
        return_end_token=True,
        patience=opts.get("patience", 1.0),
    )
    prefix = ([opts["forced_bos_token_id"]] if "forced_bos_token_id" in opts else []) + opts.get(
        "prefix", []
    )
    if prefix:
        kw["target_prefix"] = [[tokens[t] for t in prefix]]
    if "suppress_tokens" in opts:
        kw["suppress_sequences"] = [[tokens[t]] for t in opts["suppress_tokens"]]
    if "bad_words" in opts:
        kw["suppress_sequences"] = [[tokens[t] for t in w] for w in opts["bad_words"]]
    return kw


@pytest.mark.parametrize("name", ["marian", "nllb"])
def test_decoding_options_match_ctranslate2(name, decoding_dir):
    """Every option of the decoding fixtures' CTranslate2 cases: n-best lists with scores,
    length penalties, repetition penalty, n-gram blocking, minimum length, target prefixes,
    suppressed tokens and sequences, length limits, patience."""
    model = decoding_dir(name)
    tokens = vocabulary_of(model)
    expected = decoding_expected(name)
    translator = tessel.Translator(str(model))
    ran = 0
    for case in expected["cases"]:
        if "ct2_tokens" not in case:
            continue
        src = case.get("src_ids", expected["src_ids"])
        result = translator.translate_batch(
            [[tokens[t] for t in src]], **ct2_kwargs(case["options"], tokens)
        )[0]
        want = [[tokens[t] for t in h] for h in case["ct2_tokens"]]
        assert result.hypotheses == want, case["name"]
        close_scores(result.scores, case["ct2_scores"], want)
        ran += 1
    assert ran >= 10


@pytest.mark.parametrize("inter_threads", [1, 2])
def test_a_batch_gives_each_example_its_result_alone(decoding_dir, inter_threads):
    """Sources of different lengths in batches of 2 (on one or two sessions at once), out of
    length order, beam 4 with 2 hypotheses: each equal to the source translated alone."""
    model = decoding_dir("nllb")
    tokens = vocabulary_of(model)
    expected = decoding_expected("nllb")
    sources = [[tokens[t] for t in line["src_ids"]] for line in expected["pipeline"]]
    sources += [sources[0][:3] + sources[0][-1:], []]
    translator = tessel.Translator(str(model), inter_threads=inter_threads)
    kw = dict(beam_size=4, num_hypotheses=2, return_scores=True, max_decoding_length=12)
    together = translator.translate_batch(sources, max_batch_size=2, **kw)
    assert len(together) == len(sources)
    for source, result in zip(sources, together):
        alone = translator.translate_batch([source], **kw)[0]
        assert result.hypotheses == alone.hypotheses
        assert result.scores == alone.scores
    assert together[-1].hypotheses == [[]]


@pytest.mark.parametrize("name", ["marian", "nllb"])
def test_text_translates_as_the_transformers_pipeline(name, decoding_dir):
    expected = decoding_expected(name)
    languages = expected.get("languages") or {}
    translator = tessel.Translator(str(decoding_dir(name)))
    texts = [line["text"] for line in expected["pipeline"]]
    got = translator.translate(
        texts, src_lang=languages.get("src_lang"), tgt_lang=languages.get("tgt_lang")
    )
    assert got == [line["output"] for line in expected["pipeline"]]


def test_bad_calls_raise_typed_errors(decoding_dir, tmp_path):
    model = decoding_dir("marian")
    translator = tessel.Translator(str(model))
    source = [["▁a", "</s>"]]
    for kwargs in [
        dict(patience=0),
        dict(beam_size=4, num_hypotheses=3, patience=0.5),
        dict(coverage_penalty=0.5),
        dict(return_attention=True),
        dict(batch_type="sentences"),
        dict(beam_size=0),
        dict(beam_size=64),
        dict(num_hypotheses=3, beam_size=2),
        dict(sampling_topk=5, beam_size=4),
        dict(target_prefix=[["no-such-token"]]),
        dict(target_prefix=[None, None]),
        dict(end_token="▁a"),
    ]:
        with pytest.raises(tessel.InputError):
            translator.translate_batch(source, **kwargs)
    with pytest.raises(tessel.UnsupportedError, match="coverage_penalty"):
        translator.translate_batch(source, coverage_penalty=0.5)
    with pytest.raises(tessel.InputError, match="language"):
        translator.translate(["x"], tgt_lang="de_DE")
    with pytest.raises(TypeError):
        translator.translate_batch(["not a list of tokens"])
    with pytest.raises(tessel.LoadError):
        tessel.Translator(str(tmp_path / "missing"))
    with pytest.raises(tessel.InputError, match="compute_type"):
        tessel.Translator(str(model), compute_type="int4")
    with pytest.raises(tessel.InputError, match="WhisperModel"):
        tessel.Translator(str(TESTS / "transcribe" / "tiny_en_32" / "model"))
    with pytest.raises(tessel.InputError, match="tokenizer"):
        tessel.Translator(str(TESTS / "translation" / "marian" / "ct2")).translate(["x"])
    assert issubclass(tessel.LoadError, tessel.Error)


def test_sampling_is_reproducible_with_a_seed(decoding_dir):
    model = decoding_dir("nllb")
    tokens = vocabulary_of(model)
    source = [tokens[t] for t in decoding_expected("nllb")["src_ids"]]
    translator = tessel.Translator(str(model))
    kw = dict(
        beam_size=1, sampling_topk=0, sampling_temperature=1.5, sampling_seed=7,
        max_decoding_length=12,
    )
    first = translator.translate_batch([source, source], **kw)
    again = translator.translate_batch([source], **kw)
    assert first[0].hypotheses == first[1].hypotheses == again[0].hypotheses
    greedy = translator.translate_batch([source], max_decoding_length=12, beam_size=1)
    other = translator.translate_batch([source], **dict(kw, sampling_seed=8))
    assert {tuple(first[0].hypotheses[0]), tuple(other[0].hypotheses[0])} != {
        tuple(greedy[0].hypotheses[0])
    }


def test_a_model_pickles_as_its_path_and_options():
    ct2_dir = TESTS / "translation" / "marian" / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    source = [[tokens[i] for i in (10, 20, 30, 0)]]
    translator = tessel.Translator(str(ct2_dir), intra_threads=2, inter_threads=2)
    copy = pickle.loads(pickle.dumps(translator))
    assert copy.model_path == translator.model_path
    assert (copy.intra_threads, copy.inter_threads) == (2, 2)
    kw = dict(beam_size=2, max_decoding_length=8, return_scores=True)
    want = translator.translate_batch(source, **kw)[0]
    got = copy.translate_batch(source, **kw)[0]
    assert (got.hypotheses, got.scores) == (want.hypotheses, want.scores)


def run_in_fork(work, timeout=60):
    """`work()`'s JSON-able result, computed in a forked child; fails (never hangs) if the
    child does not answer within `timeout` seconds."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, json.dumps(work()).encode())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not finish")
        time.sleep(0.05)
    answer = os.read(read, 1 << 20)
    os.close(read)
    return json.loads(answer)


def test_a_model_made_before_fork_works_in_the_child():
    """The parent's sessions run on two threads, which the child does not have: the child
    makes its own sessions and gets the parent's answer."""
    ct2_dir = TESTS / "translation" / "marian" / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    source = [[tokens[i] for i in (10, 20, 30, 0)], [tokens[i] for i in (7, 0)]]
    translator = tessel.Translator(str(ct2_dir), intra_threads=2)
    kw = dict(beam_size=2, max_decoding_length=8)
    want = [r.hypotheses for r in translator.translate_batch(source, **kw)]
    assert run_in_fork(lambda: [r.hypotheses for r in translator.translate_batch(source, **kw)]) == want
    # and the parent's pool still works
    assert [r.hypotheses for r in translator.translate_batch(source, **kw)] == want


def test_the_same_tokens_as_ctranslate2_when_it_is_installed():
    """On the CTranslate2 fixtures, batched, with n-best lists: where ctranslate2 is
    installed (not in CI; the committed references above cover CI)."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    for name in sorted(CT2_FAMILIES):
        ct2_dir = str(TESTS / "translation" / name / "ct2")
        tokens = json.loads((TESTS / "translation" / name / "ct2" / "shared_vocabulary.json").read_text())
        expected = read_safetensors(TESTS / "translation" / name / "expected.safetensors")
        src = [tokens[i] for i in expected["src_ids"].tolist()]
        sources = [src, src[:4] + src[-1:], src[2:]]
        kw = dict(beam_size=3, num_hypotheses=2, max_decoding_length=9, return_scores=True,
                  max_batch_size=2)
        theirs = ctranslate2.Translator(ct2_dir, compute_type="float32").translate_batch(
            sources, **kw)
        ours = tessel.Translator(ct2_dir).translate_batch(sources, **kw)
        for a, b in zip(ours, theirs):
            assert a.hypotheses == b.hypotheses, name
            close_scores(a.scores, b.scores, a.hypotheses)


SCORING = json.loads((TESTS.parent / "python" / "tests" / "fixtures" / "scoring.json").read_text())


@pytest.mark.parametrize("name", sorted(SCORING))
def test_score_batch_matches_ctranslate2(name):
    """CTranslate2's score_batch on its own conversions (tools/make_scoring_golden.py): the
    same tokens, and each log-probability within 1e-5 of its size (float32 sums over the
    model width and the vocabulary, in another order than CTranslate2's)."""
    case = SCORING[name]
    translator = tessel.Translator(str(TESTS / "translation" / name / "ct2"), inter_threads=2)
    for run in case["runs"]:
        ours = translator.score_batch(case["sources"], case["targets"], **run["options"])
        assert len(ours) == len(run["results"])
        for got, want in zip(ours, run["results"]):
            assert got.tokens == want["tokens"], run["options"]
            assert len(got.log_probs) == len(want["log_probs"])
            for g, w in zip(got.log_probs, want["log_probs"]):
                assert abs(g - w) <= 1e-5 * max(abs(w), 1.0), (run["options"], g, w)


def test_the_iterables_give_the_batch_results_in_input_order():
    """translate_iterable and score_iterable stream any iterable (a generator here) through
    the batch calls: the results of one call over the whole list, in input order, by examples
    and by tokens, with and without target prefixes."""
    ct2_dir = TESTS / "translation" / "marian" / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    sources = [[tokens[(7 * i + j) % 50 + 4] for j in range(i % 6 + 1)] for i in range(11)]
    prefixes = [None if i % 3 else [tokens[9]] for i in range(11)]
    translator = tessel.Translator(str(ct2_dir))
    kw = dict(beam_size=2, max_decoding_length=6, return_scores=True)
    want = translator.translate_batch(sources, target_prefix=prefixes, **kw)
    for batch, batch_type in [(3, "examples"), (10, "tokens")]:
        got = translator.translate_batch(
            sources, target_prefix=prefixes, max_batch_size=batch, batch_type=batch_type, **kw)
        assert [g.hypotheses for g in got] == [w.hypotheses for w in want], (batch, batch_type)
        assert [g.scores for g in got] == [w.scores for w in want]
    for batch, batch_type in [(1, "examples"), (3, "examples"), (8, "tokens")]:
        got = list(translator.translate_iterable(
            (s for s in sources), iter(prefixes), max_batch_size=batch, batch_type=batch_type, **kw))
        assert [g.hypotheses for g in got] == [w.hypotheses for w in want], (batch, batch_type)
        assert [g.scores for g in got] == [w.scores for w in want]
    targets = [s[::-1] for s in sources]
    want = translator.score_batch(sources, targets)
    got = list(translator.score_iterable(iter(sources), iter(targets), max_batch_size=4))
    assert [(g.tokens, g.log_probs) for g in got] == [(w.tokens, w.log_probs) for w in want]
    with pytest.raises(tessel.InputError, match="same length"):
        list(translator.score_iterable(sources, targets[:-1]))
    with pytest.raises(tessel.InputError, match="max_batch_size"):
        list(translator.translate_iterable(sources, max_batch_size=0))
    with pytest.raises(tessel.InputError, match="targets"):
        translator.score_batch(sources, targets[:-1])
    assert isinstance(pickle.loads(pickle.dumps(translator)), tessel.Translator)


GENERATED = json.loads(
    (TESTS.parent / "python" / "tests" / "fixtures" / "generate_tokens.json").read_text()
)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generate_tokens_yields_ctranslate2s_steps(name):
    """CTranslate2's generate_tokens (tools/make_python_golden.py): the same steps, ids,
    tokens and last marks, the prefix's tokens first; log-probabilities within 1e-5 of the
    logits' size (they are differences of logits and a log-sum-exp in float32)."""
    case = GENERATED[name]
    ct2_dir = TESTS / "translation" / name / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    translator = tessel.Translator(str(ct2_dir))
    for run in case["runs"]:
        kw = dict(run["options"])
        prefix = kw.pop("target_prefix", None)
        if prefix is not None:
            prefix = [tokens[i] for i in prefix]
        got = list(translator.generate_tokens(case["source"], prefix, **kw))
        want = run["steps"]
        assert [(g.step, g.token_id, g.token, g.is_last) for g in got] == [
            (w[0], w[1], w[2], w[4]) for w in want
        ], run["options"]
        for g, w in zip(got, want):
            assert g.batch_id == 0 and g.hypothesis_id == 0 and g.logits is None
            if w[3] is None:
                assert g.log_prob is None
            else:
                assert abs(g.log_prob - w[3]) <= 1e-5 * max(abs(w[3]), 1.0) + 2e-5, (g, w)


def test_a_dropped_token_stream_gives_its_session_back():
    """Reading two tokens of a long decode and dropping the stream: the decode stops and
    later calls on the one-session translator get the same tokens."""
    ct2_dir = TESTS / "translation" / "t5" / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    translator = tessel.Translator(str(ct2_dir), inter_threads=1)
    source = tokens[5:9] + ["</s>"]
    want = [s.token for s in translator.generate_tokens(source, max_decoding_length=6)]
    for _ in range(3):
        stream = translator.generate_tokens(source, max_decoding_length=250)
        assert [next(stream).token, next(stream).token] == want[:2]
        del stream
    assert [s.token for s in translator.generate_tokens(source, max_decoding_length=6)] == want
    with pytest.raises(tessel.UnsupportedError):
        translator.generate_tokens(source, end_token="w7")


def test_asynchronous_results_are_the_calls_results():
    """asynchronous=True returns at once with one pending result per source (CTranslate2's
    AsyncTranslationResult): each gives the synchronous call's result, and a source that
    fails raises from its own result() only."""
    ct2_dir = TESTS / "translation" / "marian" / "ct2"
    tokens = json.loads((ct2_dir / "shared_vocabulary.json").read_text())
    sources = [[tokens[i] for i in (10, 20, 30, 0)], [tokens[i] for i in (7, 0)]]
    translator = tessel.Translator(str(ct2_dir))
    kw = dict(beam_size=2, max_decoding_length=8, return_scores=True)
    want = translator.translate_batch(sources, **kw)
    pending = translator.translate_batch(sources, asynchronous=True, **kw)
    assert len(pending) == 2
    got = [p.result() for p in pending]
    assert all(p.done() for p in pending)
    assert [(g.hypotheses, g.scores) for g in got] == [(w.hypotheses, w.scores) for w in want]
    assert pending[0].result().hypotheses == want[0].hypotheses  # result() again
    too_long = [tokens[5]] * 5000
    pending = translator.translate_batch(
        [sources[0], too_long], asynchronous=True, max_input_length=0, **kw)
    assert pending[0].result().hypotheses == want[0].hypotheses
    with pytest.raises(tessel.InputError):
        pending[1].result()
    with pytest.raises(tessel.InputError):
        translator.translate_batch([sources[0], too_long], max_input_length=0, **kw)
