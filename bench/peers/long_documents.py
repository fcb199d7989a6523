#!/usr/bin/env python3
"""Long documents: tessel against `transformers` on LED at led-base-16384's layout, or on
LongT5 at long-t5-tglobal-base's (`--family longt5-tglobal`).

Builds (once, under --work) a random-weight `LEDForConditionalGeneration` with
allenai/led-base-16384's dimensions (6 + 6 layers, d_model 768, 12 heads, ffn 3072, a
50,265-token vocabulary, `attention_window` 1024 in every layer, 16,384 encoder positions), or a
`LongT5ForConditionalGeneration` with google/long-t5-tglobal-base's (12 + 12 layers, d_model 768,
12 heads of 64, gated-GELU ffn 2048, 32,128 tokens, `local_radius` 127, `global_block_size` 16),
and a word-level stand-in tokenizer (`w<id>`), then for each source length times, in the same
run:

- tessel: `tessel summarize --model DIR --input DOC --threads T --beam 1`, generating exactly
  `--new` tokens; its report gives the encoder's time and the whole command is timed;
- transformers: the encoder alone, then `generate` (greedy, exactly `--new` new tokens), with
  `torch.set_num_threads(T)`;

LED with global attention on the first token, as the model cards. Prints one JSON line per
length and a Markdown table, with the CPU's name.

Usage: python3 bench/peers/long_documents.py --tessel target/release/tessel
           [--family led|longt5-tglobal] [--lengths 4096 16384] [--threads 2] [--new 64]
           [--work /tmp/led-bench]
(torch, transformers, tokenizers, safetensors, numpy).
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np
import torch

VOCAB = 50265
CONFIG = dict(vocab_size=VOCAB, d_model=768, encoder_layers=6, decoder_layers=6,
              encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
              decoder_ffn_dim=3072, max_encoder_position_embeddings=16384,
              max_decoder_position_embeddings=1024, attention_window=[1024] * 6,
              activation_function="gelu", dropout=0.0, attention_dropout=0.0,
              activation_dropout=0.0, bos_token_id=0, pad_token_id=1, eos_token_id=2,
              decoder_start_token_id=2)
LONGT5_VOCAB = 32128
LONGT5 = dict(vocab_size=LONGT5_VOCAB, d_model=768, d_kv=64, d_ff=2048, num_layers=12,
              num_decoder_layers=12, num_heads=12, local_radius=127, global_block_size=16,
              encoder_attention_type="transient-global", feed_forward_proj="gated-gelu",
              relative_attention_num_buckets=32, relative_attention_max_distance=128,
              tie_word_embeddings=False, dropout_rate=0.0, decoder_start_token_id=0,
              pad_token_id=0, eos_token_id=1)
# Per family: transformers' class, its config, the vocabulary, the special tokens' ids (in
# the stand-in tokenizer's order), whether the document starts with <s>, and the row of the
# output projection zeroed so that EOS never wins (every run has its full length).
FAMILIES = {
    "led": dict(cls="LEDForConditionalGeneration", config=CONFIG, vocab=VOCAB,
                specials={"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}, bos=True,
                name="led-base-16384"),
    "longt5-tglobal": dict(cls="LongT5ForConditionalGeneration", config=LONGT5,
                           vocab=LONGT5_VOCAB, specials={"<pad>": 0, "</s>": 1, "<unk>": 2},
                           bos=False, name="long-t5-tglobal-base"),
}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def build(work, family):
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoConfig, PreTrainedTokenizerFast

    model_dir = os.path.join(work, family["name"])
    if os.path.exists(os.path.join(model_dir, "model.safetensors")):
        return model_dir
    torch.manual_seed(0)
    cls = getattr(transformers, family["cls"])
    config = AutoConfig.for_model(cls.config_class.model_type, **family["config"])
    model = cls(config).eval()
    eos = family["specials"]["</s>"]
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / np.sqrt(p.shape[-1]))
        model.get_output_embeddings().weight[eos] = 0.0
    model.save_pretrained(model_dir, safe_serialization=True)
    vocab = dict(family["specials"])
    vocab.update({"w%d" % i: i for i in range(len(vocab), family["vocab"])})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    bos = {"bos_token": "<s>"} if family["bos"] else {}
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>", **bos).save_pretrained(model_dir)
    return model_dir


def document(work, family, length):
    rng = np.random.default_rng(length)
    first = len(family["specials"])
    bos = [family["specials"]["<s>"]] if family["bos"] else []
    words = [int(i) for i in rng.integers(first, family["vocab"], length - 1 - len(bos))]
    ids = bos + words + [family["specials"]["</s>"]]
    path = os.path.join(work, "%s_doc_%d.txt" % (family["name"], length))
    with open(path, "w") as f:
        f.write(" ".join(["<s>"] * len(bos) + ["w%d" % i for i in words] + ["</s>"]))
    return path, ids


def run_tessel(binary, model_dir, doc, threads, new):
    cmd = [binary, "summarize", "--model", model_dir, "--input", doc, "--threads", str(threads),
           "--beam", "1", "--max-length", str(new + 1), "--min-length", str(new + 1)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    total = time.perf_counter() - start
    m = re.search(r"(\d+) source tokens, encoder ([\d.]+) ms, ([\d.]+) ms/token over (\d+) "
                  r"tokens, arena (\d+) bytes", done.stderr)
    if not m:
        raise SystemExit("no report in: " + done.stderr)
    return dict(source_tokens=int(m[1]), encoder_s=float(m[2]) / 1e3,
                ms_per_token=float(m[3]), generated=int(m[4]), arena_bytes=int(m[5]),
                command_s=total)


def run_transformers(model, ids, threads, new, led):
    torch.set_num_threads(threads)
    src = torch.tensor([ids])
    extra = {}
    if led:
        mask = torch.zeros_like(src)
        mask[0, 0] = 1
        extra["global_attention_mask"] = mask
    with torch.no_grad():
        start = time.perf_counter()
        model.get_encoder()(input_ids=src, **extra)
        encoder = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(input_ids=src, num_beams=1, do_sample=False, min_new_tokens=new,
                             max_new_tokens=new, **extra)
        generate = time.perf_counter() - start
    return dict(encoder_s=encoder, generate_s=generate, generated=int(out.shape[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="led")
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--work", default="/tmp/led-bench")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    family = FAMILIES[args.family]
    model_dir = build(args.work, family)
    import transformers
    model = getattr(transformers, family["cls"]).from_pretrained(model_dir).eval()
    rows = []
    for length in args.lengths:
        doc, ids = document(args.work, family, length)
        t = run_tessel(args.tessel, model_dir, doc, args.threads, args.new)
        h = run_transformers(model, ids, args.threads, args.new, args.family == "led")
        row = dict(length=length, threads=args.threads, tessel=t, transformers=h,
                   encoder_speedup=h["encoder_s"] / t["encoder_s"],
                   generate_speedup=h["generate_s"] / t["command_s"])
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n%s, %d threads, %d new tokens, %s layout (random weights)\n"
          % (cpu_name(), args.threads, args.new, family["name"]))
    print("| source tokens | tessel encoder s | transformers encoder s | tessel command s "
          "| transformers generate s | encoder × | whole × | tessel arena MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        t, h = r["tessel"], r["transformers"]
        print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f |" % (
            r["length"], t["encoder_s"], h["encoder_s"], t["command_s"], h["generate_s"],
            r["encoder_speedup"], r["generate_speedup"], t["arena_bytes"] / 1e6))
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        print("\ntessel encoder %d/%d tokens: %.2f× (linear: %.2f×)" % (
            b["length"], a["length"], b["tessel"]["encoder_s"] / a["tessel"]["encoder_s"],
            b["length"] / a["length"]))


if __name__ == "__main__":
    sys.exit(main())
