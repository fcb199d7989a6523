#!/usr/bin/env python3
"""Builds the transcription golden fixtures in tests/transcribe/ from faster-whisper.

A random-weight Whisper model with the real 30 s geometry (1500 encoder positions, 448 decoder
positions, 1501 timestamp tokens) but a small width (d_model 32), built as tools/make_whisper_golden.py
builds its models (same tokenizer construction, weight scaling and special-token layout), is
converted to CTranslate2 float16 and committed as tests/transcribe/<name>/model/ (model.bin,
config.json, vocabulary.json, tokenizer.json, preprocessor_config.json). Both engines read
these same files.

The audio is `clip.wav` (espeak-ng, 16 kHz mono s16) repeated REPEATS times, each copy
followed by GAP_SAMPLES zeros: longer than 30 s, so transcription seeks through several
windows. The Rust tests build the same samples from clip.wav (s16 / 32768).

`expected.json` holds, for each run in RUNS (faster-whisper `WhisperModel.transcribe` options),
the segments faster-whisper yields: seek, start, end, tokens, text, temperature, avg_logprob,
compression_ratio, no_speech_prob; plus the detected language for multilingual fixtures.
Every run is checked to stay at temperature 0 (sampling at a fallback temperature draws from
another generator than tessel's, so such a run could not be compared token by token).

Multilingual fixtures: CTranslate2 calls a model multilingual only for the full 51865-token
vocabulary, so faster-whisper would treat the small-vocabulary model as English-only. The
script hands faster-whisper a thin proxy of the CTranslate2 model whose `is_multilingual` is
true (everything else is the CTranslate2 model itself): faster-whisper then detects the
language on the first window, builds the `<|startoftranscript|> <|lang|> <|task|>` prompt, and
runs CTranslate2 as for a real multilingual checkpoint.

Usage (torch, transformers, ctranslate2, faster-whisper, tokenizers, numpy; espeak-ng and
ffmpeg from Debian):
    python3 tools/make_transcribe_golden.py [name ...]
The Rust tests never need Python: they read the committed fixtures.
"""

import json
import os
import shutil
import sys
import tempfile
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_whisper_golden as wg  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "transcribe")

REPEATS = 4
GAP_SAMPLES = 24000

TEXT = (
    "She sells sea shells by the sea shore. The quick brown fox jumps over the lazy dog, "
    "and seven lemons wait on the table by the window."
)

CONFIGS = {
    # tiny.en geometry (80 mels, 30 s windows, 448 target positions) at width 32.
    "tiny_en_32": dict(
        d_model=32, heads=2, encoder_layers=2, decoder_layers=2, ffn=64,
        num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
        text_tokens=340, languages=["en", "zh", "de", "es", "ru"], timestamps=1501,
        english_only=True, seed=31, embed_std=1.0,
    ),
    # The same width with a multilingual-style vocabulary: language detection and translate.
    "tiny_multi_32": dict(
        d_model=32, heads=2, encoder_layers=2, decoder_layers=2, ffn=64,
        num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
        text_tokens=340, languages=["en", "zh", "de", "es", "ru"], timestamps=1501,
        english_only=False, seed=47, embed_std=1.0,
    ),
}

COMMON = dict(temperature=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], word_timestamps=False, vad_filter=False)

RUNS_EN = {
    "greedy": dict(beam_size=1),
    "beam5": dict(beam_size=5),
    "greedy_plain": dict(beam_size=1, without_timestamps=True),
    "beam5_plain": dict(beam_size=5, without_timestamps=True),
    "greedy_prompt_no_condition": dict(
        beam_size=1, condition_on_previous_text=False,
        initial_prompt="Seven lemons by the window.",
    ),
    "greedy_prompt": dict(beam_size=1, initial_prompt="The quick fox."),
}

RUNS_MULTI = {
    "detect_greedy": dict(beam_size=1),
    "translate_beam5": dict(beam_size=5, task="translate"),
    "german_greedy_plain": dict(beam_size=1, language="de", without_timestamps=True),
}


class Multilingual:
    """A CTranslate2 Whisper model that says it is multilingual; all else is the model's.

    CTranslate2's own `detect_language` refuses such a model, so this one computes what it
    computes (openai-whisper's `detect_language`): the decoder's logits after
    `<|startoftranscript|>` over CTranslate2's encoder output, every non-language token
    removed, softmax, best first. The decoder is the transformers model with the float16-rounded
    weights the CTranslate2 file holds, in float64.
    """

    is_multilingual = True

    def __init__(self, model, hf_model, sot, languages):
        self._model = model
        self._hf = hf_model
        self._sot = sot
        self._languages = languages

    def __getattr__(self, name):
        return getattr(self._model, name)

    def detect_language(self, encoder_output):
        import torch

        enc = torch.from_numpy(np.array(encoder_output, dtype=np.float64))
        with torch.no_grad():
            logits = self._hf(
                encoder_outputs=(enc,), decoder_input_ids=torch.tensor([[self._sot]])
            ).logits[0, -1].numpy()
        ids = np.array([i for _, i in self._languages])
        probs = np.exp(logits[ids] - logits[ids].max())
        probs /= probs.sum()
        order = np.argsort(-probs, kind="stable")
        return [[(self._languages[i][0], float(probs[i])) for i in order]]


def clip_samples(path):
    with wave.open(path, "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


def long_audio(clip):
    gap = np.zeros(GAP_SAMPLES, dtype=np.float32)
    return np.concatenate([part for _ in range(REPEATS) for part in (clip, gap)])


def write_clip(path):
    """espeak-ng speech, resampled to 16 kHz by ffmpeg (openai-whisper's load_audio), s16."""
    import subprocess

    import whisper

    raw = path + ".espeak.wav"
    subprocess.run(["espeak-ng", "-v", "en", "-s", "175", "-w", raw, TEXT], check=True)
    audio = whisper.audio.load_audio(raw)
    os.remove(raw)
    pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype(np.int16)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())


def build_model(c, model_dir):
    import ctranslate2
    from transformers import WhisperFeatureExtractor

    # Token embeddings (tied to the output projection) at standard deviation `embed_std`: logits
    # peaked enough that greedy decoding's average log-probability stays above -1 (no
    # temperature fallback), spread enough that the timestamp rules still produce segments.
    wg.EMBED_STD = c["embed_std"]
    tokenizer = wg.build_tokenizer(c, None)
    model, _ = wg.make_model(c, tokenizer.convert_tokens_to_ids("\u0120"))
    with tempfile.TemporaryDirectory() as hf_dir:
        model.save_pretrained(hf_dir, safe_serialization=True)
        tokenizer.save_pretrained(hf_dir)
        WhisperFeatureExtractor(feature_size=c["num_mel_bins"]).save_pretrained(hf_dir)
        conv = ctranslate2.converters.TransformersConverter(
            hf_dir, copy_files=["tokenizer.json", "preprocessor_config.json"]
        )
        conv.convert(model_dir, quantization="float16", force=True)
    # The weights as the float16 file holds them, evaluated in float64.
    return model.half().double().eval()


def transcribe(model, audio, options):
    segments, info = model.transcribe(audio, **COMMON, **options)
    out = []
    for s in segments:
        out.append(dict(
            seek=s.seek, start=s.start, end=s.end, tokens=list(s.tokens), text=s.text,
            temperature=s.temperature, avg_logprob=s.avg_logprob,
            compression_ratio=s.compression_ratio, no_speech_prob=s.no_speech_prob,
        ))
    return dict(language=info.language, segments=out, options=options)


def build(name, c):
    import ctranslate2
    from faster_whisper import WhisperModel

    out = os.path.join(ROOT, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    model_dir = os.path.join(out, "model")
    os.makedirs(out)
    hf_model = build_model(c, model_dir)
    clip_path = os.path.join(ROOT, "clip.wav")
    if not os.path.exists(clip_path):
        write_clip(clip_path)
    audio = long_audio(clip_samples(clip_path))

    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=1)
    runs = RUNS_EN
    if not c["english_only"]:
        ids, _ = wg.token_ids(c)
        languages = [("<|%s|>" % lang, ids["<|%s|>" % lang]) for lang in c["languages"]]
        model.model = Multilingual(
            model.model, hf_model, ids["<|startoftranscript|>"], languages
        )
        runs = RUNS_MULTI
    expected = dict(
        name=name, repeats=REPEATS, gap_samples=GAP_SAMPLES, samples=int(audio.shape[0]),
        faster_whisper=__import__("faster_whisper").__version__,
        ctranslate2=ctranslate2.__version__, runs={},
    )
    for run, options in runs.items():
        result = transcribe(model, audio, options)
        temps = {s["temperature"] for s in result["segments"]}
        assert temps <= {0.0}, (run, temps)
        assert result["segments"], run
        expected["runs"][run] = result
        print(name, run, result["language"], len(result["segments"]), "segments",
              sum(len(s["tokens"]) for s in result["segments"]), "tokens",
              "seeks", sorted({s["seek"] for s in result["segments"]}))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")


def main():
    names = sys.argv[1:] or list(CONFIGS)
    for name in names:
        build(name, CONFIGS[name])


if __name__ == "__main__":
    main()
