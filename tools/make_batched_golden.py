#!/usr/bin/env python3
"""Builds the batched-transcription golden fixtures: tests/transcribe/batched/vad_chunks.json
and tests/transcribe/<model>/batched.json.

Runs faster-whisper's `BatchedInferencePipeline(model).transcribe(...)` (faster-whisper 1.2.1,
CTranslate2 4.8.5, CPU, float32, cpu_threads=1) on the committed random-weight fixture models
of tools/make_transcribe_golden.py (tests/transcribe/tiny_en_32/model, tiny_multi_32/model) and
on audio built from tests/transcribe/clip.wav (7.67 s of espeak-ng speech) and zeros:

- `long`: clip + 1.5 s of zeros, 4 times (586916 samples): the audio of make_words_golden.py;
- `gaps`: clip, 6 s zeros, clip, 0.3 s zeros, clip, 12 s zeros, clip, 3 s zeros, clip:
  long silences, so the VAD finds several speech chunks and collect_chunks merges some;
- `short`: the first 320000 samples (20 s) of `long` (vad_filter=False is allowed below 30 s);
- `silence`: 160000 zeros (no speech).

batched/vad_chunks.json: per audio, the VAD speech timestamps with the batched defaults
(VadOptions(max_speech_duration_s=30, min_silence_duration_ms=160)), collect_chunks' metadata
(offset, duration, segments) and, per chunk, its feature matrix (FeatureExtractor(chunk)[..., :-1],
before pad_or_trim): shape, float64 sums of the whole matrix and of its first and last column,
min, max, and the sha256 of its float32 bytes (row-major, n_mels x frames).

<model>/batched.json: per run, the options, the info fields (language, language_probability,
duration, duration_after_vad), the per-batch language detections of the proxy (multilingual),
and the segments (id, seek, start, end, text, tokens, temperature, avg_logprob,
compression_ratio, no_speech_prob, words as [word, start, end, probability] or null).
Each run with `differs_from` was checked to give other segments than that run. `same_as` lists
option changes checked NOT to change the segments beyond float noise (batch_size, temperature):
identical tokens, text, times, ids, seeks, words; the largest avg_logprob, no_speech_prob and
word probability differences are recorded.

The multilingual model is handed to faster-whisper through a proxy that says it is
multilingual (CTranslate2 only calls a 51865-token vocabulary multilingual); see Multilingual.

Usage: python3 tools/make_batched_golden.py [tiny_en_32|tiny_multi_32]   (faster-whisper 1.2.1,
ctranslate2, onnxruntime, numpy; writes vad_chunks.json and the named models' fixtures, all
models' when none is named)
"""

import copy
import hashlib
import json
import os
import struct
import sys
import time
import wave
from math import erf

import numpy as np

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROOT = os.path.join(REPO, "tests", "transcribe")
OUT = os.path.join(ROOT, "batched")
SR = 16000


def clip_samples(path):
    with wave.open(path, "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


def zeros(seconds):
    return np.zeros(int(round(seconds * SR)), dtype=np.float32)


def audios():
    clip = clip_samples(os.path.join(ROOT, "clip.wav"))
    long = np.concatenate([p for _ in range(4) for p in (clip, zeros(1.5))])
    gaps = np.concatenate([clip, zeros(6), clip, zeros(0.3), clip, zeros(12), clip, zeros(3), clip])
    return {
        "long": (long, "clip + 24000 zeros, 4 times"),
        "gaps": (gaps, "clip, 96000 zeros, clip, 4800 zeros, clip, 192000 zeros, clip, 48000 zeros, clip"),
        "short": (long[: 20 * SR], "the first 320000 samples of long"),
        "silence": (zeros(10), "160000 zeros"),
    }


# --- the decoder's first step, for language detection -------------------------------------

DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: np.float64}


def read_ct2(path):
    """The variables of a CTranslate2 model.bin (ctranslate2.specs.model_spec._serialize)."""
    b = open(path, "rb").read()
    p = 0

    def u(fmt):
        nonlocal p
        v = struct.unpack_from(fmt, b, p)
        p += struct.calcsize(fmt)
        return v[0]

    def s():
        nonlocal p
        n = u("H")
        v = b[p : p + n - 1].decode()
        p += n
        return v

    u("I"), s(), u("I")  # binary version, spec name, revision
    out = {}
    for _ in range(u("I")):
        k = s()
        shape = [u("I") for _ in range(u("B"))]
        t = u("B")
        nb = u("I")
        out[k] = np.frombuffer(b[p : p + nb], dtype=DTYPES[t]).reshape(shape)
        p += nb
    for _ in range(u("I")):
        a = s()
        out[a] = out[s()]
    return out


def first_step_logits(W, enc, sot):
    """Decoder logits after <|startoftranscript|> alone, float64, for one encoder output (T, d)."""
    g = lambda k: np.asarray(W[k], dtype=np.float64)  # noqa: E731
    H = int(W["decoder/num_heads"])

    def ln(x, p):
        m = x.mean()
        v = ((x - m) ** 2).mean()
        return (x - m) / np.sqrt(v + 1e-5) * g(p + "/gamma") + g(p + "/beta")

    x = g("decoder/embeddings/weight")[sot] + g("decoder/position_encodings/encodings")[0]
    enc = np.asarray(enc, dtype=np.float64)
    d = x.shape[0]
    layer = 0
    while "decoder/layer_%d/ffn/linear_0/weight" % layer in W:
        p = "decoder/layer_%d/" % layer
        h = ln(x, p + "self_attention/layer_norm")
        qkv = g(p + "self_attention/linear_0/weight") @ h + g(p + "self_attention/linear_0/bias")
        x = x + g(p + "self_attention/linear_1/weight") @ qkv[2 * d :] + g(p + "self_attention/linear_1/bias")
        h = ln(x, p + "attention/layer_norm")
        q = g(p + "attention/linear_0/weight") @ h + g(p + "attention/linear_0/bias")
        kv = enc @ g(p + "attention/linear_1/weight").T + g(p + "attention/linear_1/bias")
        k, v = kv[:, :d], kv[:, d:]
        dh = d // H
        ctx = np.zeros(d)
        for hh in range(H):
            sl = slice(hh * dh, (hh + 1) * dh)
            sc = k[:, sl] @ q[sl] / np.sqrt(dh)
            a = np.exp(sc - sc.max())
            a /= a.sum()
            ctx[sl] = a @ v[:, sl]
        x = x + g(p + "attention/linear_2/weight") @ ctx + g(p + "attention/linear_2/bias")
        h = ln(x, p + "ffn/layer_norm")
        z = g(p + "ffn/linear_0/weight") @ h + g(p + "ffn/linear_0/bias")
        z = 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
        x = x + g(p + "ffn/linear_1/weight") @ z + g(p + "ffn/linear_1/bias")
        layer += 1
    x = ln(x, "decoder/layer_norm")
    return g("decoder/projection/weight") @ x


class Multilingual:
    """The CTranslate2 model, saying it is multilingual; detect_language as CTranslate2's.

    CTranslate2's own detect_language refuses a model whose vocabulary is not 51865 tokens, and
    its generate/align hide the language tokens' logits (the timestamp rules suppress them at
    the first step; align's probabilities come out 0), so the decoder's first step after
    <|startoftranscript|> is evaluated here in float64 from model.bin's weights over
    CTranslate2's float32 encoder output (checked: within 3e-6 of CTranslate2's own logits on
    the tokens it leaves finite), and the language tokens' logits are soft-maxed, best first.
    """

    is_multilingual = True

    def __init__(self, model, weights, sot, languages):
        self._model = model
        self._weights = weights
        self._sot = sot
        self._languages = languages  # [("<|en|>", 342), ...]
        self.detections = []

    def __getattr__(self, name):
        return getattr(self._model, name)

    def detect_language(self, encoder_output):
        enc = np.array(encoder_output, dtype=np.float32)
        ids = np.array([i for _, i in self._languages])
        out = []
        for b in range(enc.shape[0]):
            logits = first_step_logits(self._weights, enc[b], self._sot)[ids]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            order = np.argsort(-p, kind="stable")
            out.append([(self._languages[i][0], float(p[i])) for i in order])
        self.detections.append([[o[0][0], o[0][1]] for o in out])
        return out


# --- runs -----------------------------------------------------------------------------------

def seg_dict(s):
    return dict(
        id=s.id, seek=s.seek, start=s.start, end=s.end, text=s.text, tokens=list(s.tokens),
        temperature=s.temperature, avg_logprob=s.avg_logprob,
        compression_ratio=s.compression_ratio, no_speech_prob=s.no_speech_prob,
        words=None if s.words is None else [[w.word, w.start, w.end, w.probability] for w in s.words],
    )


def compare(a, b):
    """Whether two runs differ only in float noise (avg_logprob, no_speech_prob, word
    probabilities) and the reported temperature; the largest differences."""
    exact = ("id", "seek", "start", "end", "text", "tokens", "compression_ratio")
    same = len(a) == len(b) and all(x[k] == y[k] for x, y in zip(a, b) for k in exact)
    dl = max([abs(x["avg_logprob"] - y["avg_logprob"]) for x, y in zip(a, b)] or [0.0])
    dn = max([abs(x["no_speech_prob"] - y["no_speech_prob"]) for x, y in zip(a, b)] or [0.0])
    dw = 0.0
    for x, y in zip(a, b):
        if (x["words"] is None) != (y["words"] is None) or len(x["words"] or []) != len(y["words"] or []):
            same = False
            continue
        for u, v in zip(x["words"] or [], y["words"] or []):
            same = same and u[:3] == v[:3]
            dw = max(dw, abs(u[3] - v[3]))
    return dict(same_but_floats=same, max_avg_logprob_diff=dl, max_no_speech_prob_diff=dn,
                max_word_probability_diff=dw, temperatures=sorted({x["temperature"] for x in b}))


def vad_and_chunks(audio):
    from faster_whisper.feature_extractor import FeatureExtractor
    from faster_whisper.vad import VadOptions, collect_chunks, get_speech_timestamps

    speech = get_speech_timestamps(audio, VadOptions(max_speech_duration_s=30, min_silence_duration_ms=160))
    chunks, meta = collect_chunks(audio, speech, max_duration=30)
    fe = FeatureExtractor(feature_size=80)
    feats = []
    for c in chunks:
        if len(c) == 0:
            feats.append(None)
            continue
        f = fe(c)[..., :-1]
        f64 = f.astype(np.float64)
        feats.append(dict(
            samples=len(c), shape=list(f.shape), sum=float(f64.sum()),
            first_col_sum=float(f64[:, 0].sum()), last_col_sum=float(f64[:, -1].sum()),
            max=float(f.max()), min=float(f.min()),
            sha256_f32=hashlib.sha256(np.ascontiguousarray(f, dtype=np.float32).tobytes()).hexdigest(),
        ))
    return dict(
        speech=[dict(start=int(s["start"]), end=int(s["end"])) for s in speech],
        chunks=[dict(offset=m["offset"], duration=m["duration"],
                     segments=[dict(start=int(s["start"]), end=int(s["end"])) for s in m["segments"]])
                for m in meta],
        features=feats,
    )


CLIPS = [{"start": 0.5, "end": 9.0}, {"start": 10.0, "end": 31.0}]
# Without timestamps (the batched default), the random-weight models still emit timestamp
# tokens and each chunk decodes to max_length: hundreds of 1-token segments. Only `default`
# keeps that; the other runs without timestamps are capped at SHORT new tokens per chunk
# (max_new_tokens, a real option: max_length = len(prompt) + SHORT) to keep the files small.
SHORT = 40
# name: (audio, options, the run it must differ from or None)
RUNS_EN = {
    "default": ("long", dict(), None),
    "short": ("long", dict(max_new_tokens=SHORT), "default"),
    "greedy": ("long", dict(beam_size=1, max_new_tokens=SHORT), "short"),
    "timestamps": ("long", dict(without_timestamps=False), "default"),
    "timestamps_greedy": ("long", dict(without_timestamps=False, beam_size=1), "timestamps"),
    "words": ("long", dict(word_timestamps=True, max_new_tokens=SHORT), "short"),
    "words_timestamps": ("long", dict(word_timestamps=True, without_timestamps=False), "timestamps"),
    "words_timestamps_greedy": ("long", dict(word_timestamps=True, without_timestamps=False, beam_size=1),
                                "timestamps_greedy"),
    "initial_prompt": ("long", dict(initial_prompt="Sea shells", max_new_tokens=SHORT), "short"),
    "initial_prompt_timestamps": ("long", dict(initial_prompt="Sea shells", without_timestamps=False),
                                  "timestamps"),
    "hotwords_timestamps": ("long", dict(hotwords="lemons", without_timestamps=False), "timestamps"),
    "clip_timestamps": ("long", dict(clip_timestamps=CLIPS, max_new_tokens=SHORT), "short"),
    "clip_timestamps_words": ("long", dict(clip_timestamps=CLIPS, word_timestamps=True,
                                           without_timestamps=False), "timestamps"),
    "vad_dict": ("long", dict(vad_parameters={"threshold": 0.5}, max_new_tokens=SHORT), "short"),
    "gaps": ("gaps", dict(max_new_tokens=SHORT), None),
    "gaps_timestamps": ("gaps", dict(without_timestamps=False), "gaps"),
    "gaps_timestamps_words": ("gaps", dict(without_timestamps=False, word_timestamps=True), "gaps_timestamps"),
    "gaps_greedy_batch2": ("gaps", dict(beam_size=1, batch_size=2, without_timestamps=False), "gaps_timestamps"),
    "short_no_vad": ("short", dict(vad_filter=False, without_timestamps=False), None),
    "silence": ("silence", dict(), None),
}
RUNS_MULTI = {
    "en_given": ("long", dict(language="en", without_timestamps=False), None),
    "detected": ("long", dict(without_timestamps=False), "en_given"),
    "detected_plain": ("long", dict(max_new_tokens=SHORT), None),
    "multilingual": ("gaps", dict(multilingual=True, without_timestamps=False), None),
    "multilingual_de": ("gaps", dict(multilingual=True, language="de", beam_size=1,
                                     without_timestamps=False), None),
    "de_timestamps_greedy": ("gaps", dict(language="de", without_timestamps=False, beam_size=1),
                             "multilingual_de"),
}
# Option changes that must not change the segments beyond float noise (checked, recorded).
SAME_AS = {
    "tiny_en_32": [
        ("default", dict(batch_size=1)), ("default", dict(batch_size=4)),
        ("gaps_timestamps", dict(batch_size=1)), ("gaps_timestamps", dict(batch_size=3)),
        ("gaps_timestamps_words", dict(batch_size=1)),
        ("greedy", dict(temperature=0.8)), ("default", dict(temperature=[0.6, 0.0])),
        ("timestamps", dict(prefix="Sea shells")),
        ("timestamps", dict(compression_ratio_threshold=0.1, log_prob_threshold=0.0,
                            no_speech_threshold=0.0, condition_on_previous_text=True,
                            max_initial_timestamp=0.0, best_of=1)),
    ],
    "tiny_multi_32": [("multilingual", dict(batch_size=1))],
}


def run_model(name, runs, data):
    import faster_whisper
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    model = WhisperModel(os.path.join(ROOT, name, "model"), device="cpu",
                         compute_type="float32", cpu_threads=1)
    proxy = None
    if name == "tiny_multi_32":
        vocab = json.load(open(os.path.join(ROOT, name, "model", "vocabulary.json")))
        langs = [(t, i) for i, t in enumerate(vocab) if t in ("<|en|>", "<|zh|>", "<|de|>", "<|es|>", "<|ru|>")]
        weights = read_ct2(os.path.join(ROOT, name, "model", "model.bin"))
        proxy = Multilingual(model.model, weights, vocab.index("<|startoftranscript|>"), langs)
        model.model = proxy
    pipe = BatchedInferencePipeline(model)

    def go(audio_name, options):
        if proxy:
            proxy.detections = []
        t = time.time()
        segments, info = pipe.transcribe(data[audio_name][0], **copy.deepcopy(options))
        segs = [seg_dict(s) for s in segments]
        return dict(
            audio=audio_name, options=options, language=info.language,
            language_probability=float(info.language_probability), duration=info.duration,
            duration_after_vad=info.duration_after_vad,
            detections=list(proxy.detections) if proxy else None,
            segments=segs,
        ), time.time() - t

    out = dict(name=name, faster_whisper=faster_whisper.__version__,
               ctranslate2=__import__("ctranslate2").__version__, runs={}, same_as=[])
    for run, (audio_name, options, base) in runs.items():
        r, dt = go(audio_name, options)
        if base is not None:
            assert out["runs"][base]["segments"] != r["segments"], (run, "same as", base)
            r["differs_from"] = base
        out["runs"][run] = r
        print("%-13s %-26s %3d segs %4d tokens %3d words lang=%s p=%.3f after_vad=%.3fs det=%s %.1fs" % (
            name, run, len(r["segments"]), sum(len(s["tokens"]) for s in r["segments"]),
            sum(len(s["words"] or []) for s in r["segments"]), r["language"],
            r["language_probability"], r["duration_after_vad"],
            [[d[0] for d in det] for det in (r["detections"] or [])], dt), flush=True)
    for run, extra in SAME_AS.get(name, []):
        audio_name, options, _ = runs[run]
        r, dt = go(audio_name, dict(options, **extra))
        diff = compare(out["runs"][run]["segments"], r["segments"])
        identical = r["segments"] == out["runs"][run]["segments"]
        out["same_as"].append(dict(run=run, extra=extra, identical=identical, **diff))
        print("%-13s %-26s + %s: identical=%s %s %.1fs" % (name, run, extra, identical, diff, dt), flush=True)
        assert diff["same_but_floats"], (run, extra, "changes more than float noise")
    return out


def main():
    t0 = time.time()
    os.makedirs(OUT, exist_ok=True)
    data = audios()
    vad = {}
    for k, (a, desc) in data.items():
        vad[k] = dict(description=desc, samples=len(a), **vad_and_chunks(a))
        print("audio %-8s %7d samples, %2d speech chunks -> chunks (offset, duration, n) %s" % (
            k, len(a), len(vad[k]["speech"]),
            [(round(c["offset"], 3), round(c["duration"], 3), len(c["segments"])) for c in vad[k]["chunks"]]))
    with open(os.path.join(OUT, "vad_chunks.json"), "w") as f:
        json.dump(vad, f, separators=(",", ":"))
        f.write("\n")
    for name, runs in (("tiny_en_32", RUNS_EN), ("tiny_multi_32", RUNS_MULTI)):
        if len(sys.argv) > 1 and name not in sys.argv[1:]:
            continue
        out = run_model(name, runs, data)
        with open(os.path.join(ROOT, name, "batched.json"), "w") as f:
            json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
    print("done in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
