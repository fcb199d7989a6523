#!/usr/bin/env python3
"""Builds the Whisper golden fixtures in tests/whisper/ from Hugging Face `transformers`.

For each configuration in CONFIGS it builds a random-weight `WhisperForConditionalGeneration`
(PyTorch on CPU, fixed seeds), with a small byte-level BPE tokenizer whose special tokens sit
where Whisper puts them (text tokens, then `<|endoftext|>`, `<|startoftranscript|>`, languages,
`<|translate|>`, `<|transcribe|>`, `<|startoflm|>`, `<|startofprev|>`, `<|nocaptions|>`,
`<|notimestamps|>`, then timestamp tokens `<|0.00|>` ... filling the vocabulary), and writes
under tests/whisper/<name>/:

  hf/        model.save_pretrained(safe_serialization=True) in float32: config.json,
             model.safetensors, generation_config.json; plus the tokenizer
             (tokenizer.json, vocab.json, merges.txt, tokenizer_config.json, ...) and
             preprocessor_config.json
  ct2/       hf/ converted by ctranslate2.converters.TransformersConverter, quantization=None
             (float32): model.bin, config.json, vocabulary.json, tokenizer.json,
             preprocessor_config.json
  ct2_f16/   the same with quantization="float16"
  clip.wav   the espeak-ng clip (16 kHz mono s16) the mel was computed from
  expected.safetensors  `mel` (F32 [n_mels, frames], openai-whisper's log-mel of clip.wav),
             `encoder_output` (F64 [frames/2, d_model]), `decoder_input_ids` (I64, the prompt
             then random text tokens), `logits` (F64 [len, vocab], teacher-forced), `prompt`,
             `greedy_tokens` (transformers generate, float64), `greedy_margin` (smallest
             top-1 minus top-2 gap on that path), `ct2_greedy_tokens`,
             `ct2_f16_greedy_tokens` (token sequences include the prompt)
  names.txt  the HF state-dict keys and the model.bin variables, with shapes
  stats.json agreement figures quoted in tests/whisper/README.md

Random weights (see `init_weights`): every Linear/Conv1d weight is Gaussian with standard
deviation GAIN / sqrt(fan_in), biases with standard deviation 0.1, LayerNorm gamma 1 +- 0.1 and
beta +- 0.1, decoder token embeddings (tied to the output projection) with standard deviation 1,
learned decoder positions with standard deviation 0.5, the encoder's sinusoidal positions as
transformers initialises them (the real checkpoints' values). The cross-attention output
projection is multiplied by 0.3 (as bench/peers/make_model.py does) so that the audio context,
which is the same at every step, does not drown the part of the residual stream that depends on
the previous tokens; with transformers' default init (std 0.02) greedy decoding repeats one
token. The `<|endoftext|>` embedding row is zero, so its logit is exactly 0 while the best logit
is always positive: no engine ever stops early, and every greedy run has its full length.

Usage (torch, transformers, ctranslate2, openai-whisper, tokenizers, safetensors, numpy;
espeak-ng and ffmpeg from Debian):
    python3 tools/make_whisper_golden.py            # all fixtures
    python3 tools/make_whisper_golden.py tiny_like_80
Checked with torch 2.15.0, transformers 5.23.0, ctranslate2 4.8.5, openai-whisper (mel).
The Rust tests never need Python: they read the committed fixtures.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "whisper")

GAIN = 2.0
EMBED_STD = 0.5
CROSS_OUT = 0.1
POS_STD = 2.0

CONFIGS = {
    # tiny-like: 80 mel bins, multilingual-style vocabulary and prompt
    # (<|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>).
    "tiny_like_80": dict(
        d_model=64, heads=4, encoder_layers=2, decoder_layers=2, ffn=256,
        num_mel_bins=80, max_source_positions=100, max_target_positions=32,
        text_tokens=340, languages=["en", "zh", "de", "es", "ru"], timestamps=101,
        english_only=False, seed=17, text="The quick brown fox jumps over the lazy dog.",
        forced_len=10, max_new_tokens=12,
    ),
    # large-v3-like front end (128 mel bins) with odd sizes: d_model 72 in 3 heads (d_head 24),
    # 3 encoder and 2 decoder layers, ffn 200; `.en`-style prompt
    # (<|startoftranscript|> <|notimestamps|>, no language or task token).
    "odd_128": dict(
        d_model=72, heads=3, encoder_layers=3, decoder_layers=2, ffn=200,
        num_mel_bins=128, max_source_positions=60, max_target_positions=24,
        text_tokens=300, languages=["en", "zh", "de"], timestamps=61,
        english_only=True, seed=128, text="Seven lemons, please.",
        forced_len=10, max_new_tokens=12,
    ),
}

# Whisper's special tokens around the languages, in vocabulary order.
SPECIAL_HEAD = ["<|endoftext|>", "<|startoftranscript|>"]
SPECIAL_TAIL = [
    "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>",
    "<|notimestamps|>",
]

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Seven lemons, please. And a glass of water for the table by the window.",
    "Whisper is a general-purpose speech recognition model trained on a large dataset.",
    "It is a multitasking model that can perform multilingual speech recognition,",
    "speech translation, and language identification. Numbers: 0 1 2 3 4 5 6 7 8 9.",
    "She sells sea shells by the sea shore; the shells she sells are surely seashells.",
]


def special_tokens(c):
    langs = ["<|%s|>" % lang for lang in c["languages"]]
    stamps = ["<|%.2f|>" % (i * 0.02) for i in range(c["timestamps"])]
    return SPECIAL_HEAD + langs + SPECIAL_TAIL, stamps


def build_tokenizer(c, out_dir):
    """A byte-level BPE with `text_tokens` entries (256 bytes + merges), then the specials."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import WhisperTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=c["text_tokens"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    assert tok.get_vocab_size() == c["text_tokens"], tok.get_vocab_size()
    specials, stamps = special_tokens(c)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in stamps])
    fast = WhisperTokenizerFast(
        tokenizer_object=tok, unk_token="<|endoftext|>", bos_token="<|endoftext|>",
        eos_token="<|endoftext|>", pad_token="<|endoftext|>",
    )
    ids = fast.convert_tokens_to_ids(specials + stamps)
    assert ids == list(range(c["text_tokens"], c["text_tokens"] + len(ids))), ids
    if out_dir is not None:
        fast.save_pretrained(out_dir)
    return fast


def token_ids(c):
    specials, stamps = special_tokens(c)
    base = c["text_tokens"]
    ids = {t: base + i for i, t in enumerate(specials)}
    vocab = base + len(specials) + len(stamps)
    return ids, vocab


def make_model(c, space_id):
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    ids, vocab = token_ids(c)
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    # A few text tokens stand in for the reference's non-speech list; suppress_tokens only
    # describes the model (it is written to both formats' configs), the fixtures' greedy runs
    # disable it.
    suppress = [1, 2, 7, 11, 13, 30, 31, 60, 61, 62, 63, 92, 93, 94, 95]
    cfg = WhisperConfig(
        vocab_size=vocab,
        num_mel_bins=c["num_mel_bins"],
        encoder_layers=c["encoder_layers"],
        encoder_attention_heads=c["heads"],
        decoder_layers=c["decoder_layers"],
        decoder_attention_heads=c["heads"],
        encoder_ffn_dim=c["ffn"],
        decoder_ffn_dim=c["ffn"],
        d_model=c["d_model"],
        max_source_positions=c["max_source_positions"],
        max_target_positions=c["max_target_positions"],
        activation_function="gelu",
        scale_embedding=False,
        tie_word_embeddings=True,
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        suppress_tokens=suppress,
        begin_suppress_tokens=[space_id, eot],
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        apply_spec_augment=False,
    )
    torch.manual_seed(c["seed"])
    model = WhisperForConditionalGeneration(cfg).eval()
    init_weights(model, c["seed"], eot)
    # `.en` checkpoints have no lang_to_id/task_to_id in their generation config (with them,
    # transformers' generate would detect a language).
    multilingual = {} if c["english_only"] else dict(
        lang_to_id={"<|%s|>" % lang: ids["<|%s|>" % lang] for lang in c["languages"]},
        task_to_id={"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
    )
    gen = GenerationConfig(
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        max_length=c["max_target_positions"],
        suppress_tokens=suppress,
        begin_suppress_tokens=cfg.begin_suppress_tokens,
        no_timestamps_token_id=ids["<|notimestamps|>"],
        prev_sot_token_id=ids["<|startofprev|>"],
        is_multilingual=not c["english_only"],
        alignment_heads=[[c["decoder_layers"] - 1, h] for h in range(c["heads"])],
        return_timestamps=False,
        **multilingual,
    )
    model.generation_config = gen
    return model, ids


def init_weights(model, seed, eot):
    g = torch.Generator().manual_seed(seed)

    def normal(t, std, mean=0.0):
        with torch.no_grad():
            t.copy_(mean + std * torch.randn(t.shape, generator=g, dtype=torch.float64))

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name != "proj_out":
            normal(mod.weight, GAIN / np.sqrt(mod.in_features))
            if mod.bias is not None:
                normal(mod.bias, 0.1)
        elif isinstance(mod, torch.nn.Conv1d):
            normal(mod.weight, GAIN / np.sqrt(mod.in_channels * mod.kernel_size[0]))
            normal(mod.bias, 0.1)
        elif isinstance(mod, torch.nn.LayerNorm):
            normal(mod.weight, 0.1, 1.0)
            normal(mod.bias, 0.1)
    dec = model.model.decoder
    normal(dec.embed_tokens.weight, EMBED_STD)
    normal(dec.embed_positions.weight, POS_STD)
    with torch.no_grad():
        dec.embed_tokens.weight[eot] = 0.0
        for layer in dec.layers:
            layer.encoder_attn.out_proj.weight *= CROSS_OUT
    assert model.proj_out.weight.data_ptr() == dec.embed_tokens.weight.data_ptr()


def speech(text, n_samples, wav_path):
    """espeak-ng speech at 16 kHz, padded with zeros or trimmed to n_samples (float32)."""
    import whisper

    raw = wav_path + ".espeak.wav"
    subprocess.run(["espeak-ng", "-v", "en", "-s", "190", "-w", raw, text], check=True)
    audio = whisper.audio.load_audio(raw)  # ffmpeg: mono, 16 kHz, float32 in [-1, 1)
    os.remove(raw)
    audio = whisper.audio.pad_or_trim(audio, n_samples)
    pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype(np.int16)
    import wave

    with wave.open(wav_path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())
    return pcm.astype(np.float32) / 32768.0


def hf_greedy(model, feats, prompt, n, english_only):
    """transformers `generate`, plain argmax: no suppressed or timestamp tokens.

    Whisper's `generate` builds the start sequence itself (<|startoftranscript|>, language and
    task for multilingual models, <|notimestamps|> when return_timestamps=False); the result is
    checked to start with `prompt`, and the full sequence (prompt included) is returned.
    """
    kw = {} if english_only else dict(language="en", task="transcribe")
    out = model.generate(
        input_features=feats,
        max_new_tokens=n,
        do_sample=False,
        num_beams=1,
        suppress_tokens=None,
        begin_suppress_tokens=None,
        return_timestamps=False,
        return_dict_in_generate=True,
        **kw,
    )
    seq = [int(t) for t in out.sequences[0].tolist()]
    assert seq[: len(prompt)] == prompt, (seq, prompt)
    assert len(seq) == len(prompt) + n, (seq, n)
    return seq


def manual_greedy(model, feats, prompt, n):
    """Argmax decoding by full forward passes; returns tokens and the smallest top-1/2 gap."""
    ids = list(prompt)
    gaps = []
    with torch.no_grad():
        enc = model.model.encoder(feats).last_hidden_state
        for _ in range(n):
            logits = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([ids])).logits
            last = logits[0, -1]
            top = torch.topk(last, 2).values
            gaps.append(float(top[0] - top[1]))
            ids.append(int(last.argmax()))
    return ids, min(gaps)


def ct2_greedy(ct2_dir, mel, prompt, n):
    import ctranslate2

    m = ctranslate2.models.Whisper(ct2_dir, device="cpu", compute_type="default")
    feats = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None], dtype=np.float32))
    # This CTranslate2 generates max_length / 2 tokens after the prompt (checked with 8, 12, 16,
    # 20, 24, 28 and 40), so ask for 2n; the result holds the generated tokens only.
    res = m.generate(
        feats, [prompt], beam_size=1, max_length=2 * n, suppress_blank=False,
        suppress_tokens=[],
    )
    seq = [int(t) for t in res[0].sequences_ids[0]]
    assert len(seq) == n, (seq, n)
    return list(prompt) + seq


def read_model_bin(path):
    """(spec, revision, [(name, dtype, shape)], [(alias, target)]) of a CTranslate2 model.bin."""
    import struct

    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("H")
        text = data[pos:pos + n - 1].decode()
        pos += n
        return text

    (version,) = take("I")
    spec, (revision,) = string(), take("I")
    assert version >= 4, version
    dtypes = {0: "f32", 1: "i8", 2: "i16", 3: "i32", 4: "f16", 5: "bf16"}
    variables = []
    for _ in range(take("I")[0]):
        name = string()
        (rank,) = take("B")
        shape = list(take("%dI" % rank)) if rank else []
        (dtype,) = take("B")
        (nbytes,) = take("I")
        pos += nbytes
        variables.append((name, dtypes[dtype], shape))
    aliases = [(string(), string()) for _ in range(take("I")[0])]
    return spec, revision, variables, aliases


def write_names(out):
    """names.txt: the HF state_dict keys and the CTranslate2 variables, with shapes."""
    from safetensors import safe_open

    lines = ["# hf/model.safetensors (float32)"]
    with safe_open(os.path.join(out, "hf", "model.safetensors"), "np") as f:
        for k in sorted(f.keys()):
            lines.append("%s %s" % (k, list(f.get_slice(k).get_shape())))
    for d in ("ct2", "ct2_f16"):
        spec, rev, variables, aliases = read_model_bin(os.path.join(out, d, "model.bin"))
        lines.append("# %s/model.bin: spec %s revision %d" % (d, spec, rev))
        lines += ["%s %s %s" % (n, t, s) for n, t, s in variables]
        lines += ["alias %s -> %s" % a for a in aliases]
    with open(os.path.join(out, "names.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def ct2_encoder_diff(ct2_dir, mel, enc64):
    """max |CTranslate2 encoder output - float64 reference|."""
    import ctranslate2

    m = ctranslate2.models.Whisper(ct2_dir, device="cpu", compute_type="default")
    feats = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None], dtype=np.float32))
    enc = np.array(m.encode(feats, to_cpu=True), dtype=np.float64)[0]
    return float(np.abs(enc - enc64).max())


def build(name, c):
    import ctranslate2
    import whisper
    from transformers import WhisperFeatureExtractor

    out = os.path.join(ROOT, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    hf_dir, ct2_dir, ct2_f16_dir = (os.path.join(out, d) for d in ("hf", "ct2", "ct2_f16"))
    os.makedirs(hf_dir)
    frames = 2 * c["max_source_positions"]

    tokenizer = build_tokenizer(c, None)
    model, ids = make_model(c, tokenizer.convert_tokens_to_ids("\u0120"))
    model.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer.save_pretrained(hf_dir)
    # The window is `frames` mel frames (2 * max_source_positions), not 30 s: the constructor
    # derives n_samples and nb_max_frames from chunk_length, so set them after. faster-whisper
    # recomputes n_samples = chunk_length * 16000 and slices with it, so it can only use a
    # whole number of seconds (written as an int; odd_128's 1.2 s window is written as 1.2).
    fe = WhisperFeatureExtractor(feature_size=c["num_mel_bins"])
    seconds = frames * 160 / 16000
    fe.chunk_length = int(seconds) if seconds == int(seconds) else seconds
    fe.n_samples, fe.nb_max_frames = frames * 160, frames
    fe.save_pretrained(hf_dir)
    for d, q in ((ct2_dir, None), (ct2_f16_dir, "float16")):
        conv = ctranslate2.converters.TransformersConverter(
            hf_dir, copy_files=["tokenizer.json", "preprocessor_config.json"]
        )
        conv.convert(d, quantization=q, force=True)

    # Input: log-mel of the espeak-ng clip, as openai-whisper computes it for exactly `frames`.
    audio = speech(c["text"], frames * 160, os.path.join(out, "clip.wav"))
    mel = whisper.audio.log_mel_spectrogram(torch.from_numpy(audio), c["num_mel_bins"])
    mel = mel.numpy().astype(np.float32)
    assert mel.shape == (c["num_mel_bins"], frames), mel.shape

    sot, eot, nots = ids["<|startoftranscript|>"], ids["<|endoftext|>"], ids["<|notimestamps|>"]
    if c["english_only"]:
        prompt = [sot, nots]
    else:
        prompt = [sot, ids["<|en|>"], ids["<|transcribe|>"], nots]
    rng = np.random.default_rng(c["seed"])
    forced = prompt + [int(t) for t in rng.integers(0, c["text_tokens"],
                                                    c["forced_len"] - len(prompt))]

    feats32 = torch.from_numpy(mel[None])
    model32 = model.float()
    with torch.no_grad():
        enc32 = model32.model.encoder(feats32).last_hidden_state[0].numpy()
        log32 = model32(input_features=feats32,
                        decoder_input_ids=torch.tensor([forced])).logits[0].numpy()
    hf32_greedy = hf_greedy(model32, feats32, prompt, c["max_new_tokens"], c["english_only"])

    model64 = model.double()
    feats64 = feats32.double()
    with torch.no_grad():
        enc64 = model64.model.encoder(feats64).last_hidden_state[0].numpy()
        log64 = model64(input_features=feats64,
                        decoder_input_ids=torch.tensor([forced])).logits[0].numpy()
    greedy = hf_greedy(model64, feats64, prompt, c["max_new_tokens"], c["english_only"])
    manual, margin = manual_greedy(model64, feats64, prompt, c["max_new_tokens"])
    assert greedy == manual, (greedy, manual)
    assert greedy[len(prompt):] and eot not in greedy[len(prompt):]

    ct2 = ct2_greedy(ct2_dir, mel, prompt, c["max_new_tokens"])
    ct2_16 = ct2_greedy(ct2_f16_dir, mel, prompt, c["max_new_tokens"])

    i64 = lambda xs: np.asarray(xs, dtype=np.int64)
    save_file({
        "mel": mel,
        "encoder_output": enc64,
        "decoder_input_ids": i64(forced),
        "logits": log64,
        "prompt": i64(prompt),
        "greedy_tokens": i64(greedy),
        "greedy_margin": np.asarray([margin], dtype=np.float64),
        "ct2_greedy_tokens": i64(ct2),
        "ct2_f16_greedy_tokens": i64(ct2_16),
    }, os.path.join(out, "expected.safetensors"))

    gen = greedy[len(prompt):]
    stats = {
        "name": name,
        "vocab_size": model.config.vocab_size,
        "prompt": prompt,
        "greedy": greedy,
        "distinct_generated": len(set(gen)),
        "greedy_margin": margin,
        "hf_f32_greedy_equal": hf32_greedy == greedy,
        "ct2_f32_equal": ct2 == greedy,
        "ct2_f16_equal": ct2_16 == greedy,
        "ct2_f16": ct2_16,
        "encoder_scale": float(np.abs(enc64).max()),
        "encoder_f32_max_abs": float(np.abs(enc32 - enc64).max()),
        "logit_scale": float(np.abs(log64).max()),
        "logits_f32_max_abs": float(np.abs(log32 - log64).max()),
        "ct2_encoder_max_abs": ct2_encoder_diff(ct2_dir, mel, enc64),
        "ct2_f16_encoder_max_abs": ct2_encoder_diff(ct2_f16_dir, mel, enc64),
        "mel_range": [float(mel.min()), float(mel.max())],
    }
    write_names(out)
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))
    return model


def main():
    names = sys.argv[1:] or list(CONFIGS)
    for name in names:
        build(name, CONFIGS[name])


if __name__ == "__main__":
    main()
