"""Random-weight Whisper checkpoints in the exact layout of published ones, for load timing.

Writes, under OUT (default /tmp/tessel-load), one directory per layout:
  OUT/<layout>/hf/    WhisperForConditionalGeneration with the published config.json of
                      openai/whisper-<layout> (random weights, seeded), model.safetensors,
                      generation_config.json and a byte-level BPE tokenizer of the same
                      vocabulary layout (50256 text tokens, <|endoftext|>, <|startoftranscript|>,
                      99 languages, the task tokens, 1501 timestamps: 51864 tokens for `.en`)
  OUT/<layout>/ct2/   its CTranslate2 conversion (`ct2-transformers-converter --quantization
                      float16 --copy_files tokenizer.json`), what `tessel transcribe` loads

The tokenizer's text merges are made up (pairs of byte symbols), so its tokens are not GPT-2's,
but its size and its special tokens are those of the real one: `tessel transcribe` reads it as
it reads the real one. The outputs are 75 MB (tiny.en) to 1 GB (small.en) and are never
committed; the load benchmark in `bench/` builds its own model and does not need them.

Usage (torch, transformers, tokenizers, ctranslate2):
    python3 tools/make_load_fixture.py [OUT] [LAYOUT ...]     # layouts: tiny.en base.en small.en
    tessel transcribe --model OUT/tiny.en/ct2 clip.wav         # the summary's `load`
Checked with torch 2.15.0, transformers 5.24.0, ctranslate2 4.8.5.
"""

import os
import shutil
import subprocess
import sys

import torch

# openai/whisper-*.en's published config.json (the dimensions; every other field as below).
LAYOUTS = {
    "tiny.en": dict(d_model=384, layers=4, heads=6, ffn=1536),
    "base.en": dict(d_model=512, layers=6, heads=8, ffn=2048),
    "small.en": dict(d_model=768, layers=12, heads=12, ffn=3072),
}

# openai-whisper's 99 language codes (the `.en` vocabularies keep their tokens).
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no "
    "th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw "
    "gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl "
    "mg as tt haw ln ha ba jw su"
).split()
TEXT_TOKENS = 50256
TAIL = [
    "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>",
    "<|notimestamps|>",
]
TIMESTAMPS = 1501


def specials():
    langs = ["<|%s|>" % lang for lang in LANGUAGES]
    stamps = ["<|%.2f|>" % (i * 0.02) for i in range(TIMESTAMPS)]
    return ["<|endoftext|>", "<|startoftranscript|>"] + langs + TAIL, stamps


def build_tokenizer(out_dir):
    """A byte-level BPE of TEXT_TOKENS entries: the 256 byte symbols, then merges of pairs."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import WhisperTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {s: i for i, s in enumerate(alphabet)}
    merges = []
    for a in alphabet:
        for b in alphabet:
            if len(vocab) == TEXT_TOKENS:
                break
            merges.append((a, b))
            vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    head, stamps = specials()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in head])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in stamps])
    fast = WhisperTokenizerFast(
        tokenizer_object=tok, unk_token="<|endoftext|>", bos_token="<|endoftext|>",
        eos_token="<|endoftext|>", pad_token="<|endoftext|>",
    )
    ids = fast.convert_tokens_to_ids(head + stamps)
    assert ids == list(range(TEXT_TOKENS, TEXT_TOKENS + len(ids))), ids[:4]
    fast.save_pretrained(out_dir)
    return len(fast)


def build_model(layout, vocab, out_dir):
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    d = LAYOUTS[layout]
    eot, sot = TEXT_TOKENS, TEXT_TOKENS + 1
    cfg = WhisperConfig(
        vocab_size=vocab, num_mel_bins=80,
        encoder_layers=d["layers"], decoder_layers=d["layers"],
        encoder_attention_heads=d["heads"], decoder_attention_heads=d["heads"],
        encoder_ffn_dim=d["ffn"], decoder_ffn_dim=d["ffn"], d_model=d["d_model"],
        max_source_positions=1500, max_target_positions=448,
        activation_function="gelu", scale_embedding=False, tie_word_embeddings=True,
        decoder_start_token_id=sot, bos_token_id=sot, eos_token_id=eot, pad_token_id=eot,
        begin_suppress_tokens=[220, eot], suppress_tokens=[],
    )
    torch.manual_seed(34)
    model = WhisperForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=sot, eos_token_id=eot, pad_token_id=eot,
        max_length=448, begin_suppress_tokens=[220, eot], suppress_tokens=[],
        no_timestamps_token_id=TEXT_TOKENS + 2 + len(LANGUAGES) + 5,
        is_multilingual=False,
    )
    model.save_pretrained(out_dir)


def make(out, layout):
    root = os.path.join(out, layout)
    if os.path.exists(root):
        shutil.rmtree(root)
    hf, ct2 = os.path.join(root, "hf"), os.path.join(root, "ct2")
    os.makedirs(hf)
    vocab = build_tokenizer(hf)
    assert vocab == 51864, vocab
    build_model(layout, vocab, hf)
    subprocess.run(
        ["ct2-transformers-converter", "--model", hf, "--output_dir", ct2,
         "--quantization", "float16", "--copy_files", "tokenizer.json"],
        check=True,
    )
    size = os.path.getsize(os.path.join(ct2, "model.bin"))
    print("%s: %s (model.bin %.1f MB)" % (layout, ct2, size / 1e6))


def main():
    args = sys.argv[1:]
    out = args.pop(0) if args and args[0] not in LAYOUTS else "/tmp/tessel-load"
    for layout in args or ["tiny.en", "small.en"]:
        make(out, layout)


if __name__ == "__main__":
    main()
