#!/usr/bin/env python3
"""Trains the `assets/numbers` model: English number words to digits, e.g.
"four hundred and twelve thousand and seven" -> "412007", over 0 .. 999,999,999.

The grammar and the sampler of numbers live in `numbers_words.py`. The model is a character-level
PyTorch `nn.Transformer(batch_first=True)` encoder-decoder built exactly as tessel-model runs it
(the same construction as `make_golden.py`): token embedding x sqrt(d_model) + the sinusoidal
table (pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(...), computed in float64), pre-LN
layers with final norms, a `generator` linear layer. Source symbols are characters; target
symbols are digits; decoding starts at BOS and stops at EOS.

Training draws fresh examples every step (fixed seeds, so a run is repeatable up to the
nondeterminism of CPU kernels); the numbers of the held-out set are never drawn for training
(see `heldout_pairs` for which numbers are held out). It prints loss and held-out accuracy as it
goes, then writes under --out (default assets/numbers/):

  config.json            tessel-model Config
  model.safetensors      the weights as float16, under tessel-model's names
  vocab.json             source and target symbols, specials, tokenisation
  heldout.tsv            the held-out examples, words<TAB>digits
  pytorch_greedy.tsv     PyTorch's greedy output for every held-out line, computed in float64 on
                         the float16 weights, and the smallest top-1 minus top-2 logit gap along
                         its path: words<TAB>output digits<TAB>margin (what the Rust test checks
                         tessel's tokens against)

and prints the exact-match accuracy (the first training examples and the held-out set, float32
and on the float16 weights; all numbers with at most two nonzero digits) and the wall time.

The committed model was trained in two stages (CPU, torch 2.15, numpy, safetensors; one thread):

    python3 tools/train_numbers.py --steps 2800 --exclude-drawn --out /tmp/numbers_stage1
    python3 tools/train_numbers.py --init /tmp/numbers_stage1/model.safetensors \
        --steps 700 --lr 3e-4 --warmup 50 --seed 30

The first stage also kept the held-out candidates with fewer than three nonzero digits out of
training, so it never saw "five" or "three thousand" alone; the second stage trains on them.
"""

import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
from torch import nn
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numbers_words import MAX_NUMBER, parse, sample_number, words  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "assets", "numbers")

# Vocabularies. Source: padding, unknown character, then the characters of the grammar (all 26
# letters, so any lower-case word maps to a symbol). Target: padding, BOS, EOS, digits.
SRC_SPECIALS = ["<pad>", "<unk>"]
SRC_CHARS = [" ", ",", "-"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
SRC_SYMBOLS = SRC_SPECIALS + SRC_CHARS
TGT_SPECIALS = ["<pad>", "<bos>", "<eos>"]
TGT_SYMBOLS = TGT_SPECIALS + [str(d) for d in range(10)]
SRC_PAD, SRC_UNK = 0, 1
PAD, BOS, EOS = 0, 1, 2
SRC_INDEX = {c: i for i, c in enumerate(SRC_SYMBOLS)}

# Longest written form: "seven hundred and seventy-seven million, seven hundred and
# seventy-seven thousand, seven hundred and seventy-seven" (114 characters). Longest target: 9
# digits then EOS, decoded from BOS: 10 positions.
LONGEST_SOURCE = 114
MAX_SRC_LEN = 128
MAX_TGT_LEN = 12

ARCH = dict(d_model=64, heads=4, encoder_layers=3, decoder_layers=2, d_ff=256)

HELDOUT = 2000
HELDOUT_SEED = 17
MIN_NONZERO = 3
FIXTURE_MARGIN = 1e-3


def tokenize(text):
    """Source ids of `text`: lower-cased, whitespace runs collapsed to one space and trimmed,
    then one id per character (unknown characters -> <unk>)."""
    text = " ".join(text.lower().split())
    return [SRC_INDEX.get(c, SRC_UNK) for c in text]


def target_ids(n):
    return [3 + int(d) for d in str(n)] + [EOS]


def detokenize(ids):
    return "".join(TGT_SYMBOLS[i] for i in ids if i >= 3)


def sinusoidal(rows, d):
    table = np.zeros((rows, d), dtype=np.float64)
    for pos in range(rows):
        for i in range(0, d, 2):
            angle = pos / 10000.0 ** (i / d)
            table[pos, i] = math.sin(angle)
            if i + 1 < d:
                table[pos, i + 1] = math.cos(angle)
    return torch.tensor(table)


class Seq2Seq(nn.Module):
    """nn.Transformer with embeddings, positions and generator as tessel-model defines them."""

    def __init__(self, a):
        super().__init__()
        d = a["d_model"]
        self.d = d
        self.transformer = nn.Transformer(
            d_model=d, nhead=a["heads"], num_encoder_layers=a["encoder_layers"],
            num_decoder_layers=a["decoder_layers"], dim_feedforward=a["d_ff"], dropout=0.0,
            activation="relu", batch_first=True, norm_first=True, layer_norm_eps=1e-5,
        )
        self.src_embed = nn.Embedding(len(SRC_SYMBOLS), d)
        self.tgt_embed = nn.Embedding(len(TGT_SYMBOLS), d)
        self.generator = nn.Linear(d, len(TGT_SYMBOLS))
        for table in (self.src_embed, self.tgt_embed):
            nn.init.normal_(table.weight, std=d ** -0.5)
        self.register_buffer("pe", sinusoidal(MAX_SRC_LEN, d).float(), persistent=False)

    def embed(self, table, tokens):
        return table(tokens) * math.sqrt(self.d) + self.pe[: tokens.shape[1]].to(table.weight.dtype)

    def encode(self, src):
        pad = src == SRC_PAD
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=pad)
        return memory, pad

    def decode(self, memory, pad, tgt):
        n = tgt.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, dtype=memory.dtype)
        out = self.transformer.decoder(
            self.embed(self.tgt_embed, tgt), memory, tgt_mask=mask, tgt_is_causal=True,
            memory_key_padding_mask=pad,
        )
        return self.generator(out)

    def forward(self, src, tgt):
        memory, pad = self.encode(src)
        return self.decode(memory, pad, tgt)


def batch(pairs):
    """Padded source ids, decoder inputs (BOS first) and decoder targets of `pairs`."""
    srcs = [tokenize(w) for w, _ in pairs]
    tgts = [target_ids(n) for _, n in pairs]
    src = torch.full((len(pairs), max(map(len, srcs))), SRC_PAD, dtype=torch.long)
    tgt = torch.full((len(pairs), max(map(len, tgts)) + 1), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        src[i, : len(s)] = torch.tensor(s)
        tgt[i, 0] = BOS
        tgt[i, 1: len(t) + 1] = torch.tensor(t)
    return src, tgt[:, :-1], tgt[:, 1:]


@torch.no_grad()
def greedy(model, words_list, chunk=500):
    """Greedy decodes of `words_list` (digits strings) and each path's smallest top-1 minus
    top-2 logit gap."""
    model.eval()
    outs, margins = [], []
    dtype = model.generator.weight.dtype
    for start in range(0, len(words_list), chunk):
        part = words_list[start: start + chunk]
        src, _, _ = batch([(w, 0) for w in part])
        memory, pad = model.encode(src)
        tokens = torch.full((len(part), 1), BOS, dtype=torch.long)
        done = torch.zeros(len(part), dtype=torch.bool)
        margin = torch.full((len(part),), float("inf"), dtype=dtype)
        for _ in range(MAX_TGT_LEN - 2):
            logits = model.decode(memory, pad, tokens)[:, -1]
            top = torch.topk(logits, 2)
            gap = top.values[:, 0] - top.values[:, 1]
            margin = torch.where(done, margin, torch.minimum(margin, gap))
            nxt = torch.where(done, torch.full_like(top.indices[:, 0], EOS), top.indices[:, 0])
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            done |= nxt == EOS
            if bool(done.all()):
                break
        for row in tokens[:, 1:].tolist():
            outs.append(row[: row.index(EOS) + 1] if EOS in row else row)
        margins.extend(margin.tolist())
    model.train()
    return outs, margins


def accuracy(model, pairs):
    outs, _ = greedy(model, [w for w, _ in pairs])
    return sum(detokenize(o) == str(n) and o[-1] == EOS for o, (_, n) in zip(outs, pairs)) / len(pairs)


def heldout_pairs(seed):
    """The held-out set and all drawn numbers: HELDOUT distinct numbers are drawn from the
    sampler (a fifth of them uniform over 0 .. MAX_NUMBER), each with one written form; the
    held-out set keeps those with at least MIN_NONZERO nonzero digits. Numbers with fewer (below
    3,000 values: 0 .. 99, "three thousand", "two million three hundred thousand", ...) are too
    few to hold any out: a held-out "five" or "seven hundred" would be a word or pattern the
    model never saw."""
    rng = random.Random(seed)
    seen, pairs = set(), []
    while len(pairs) < HELDOUT:
        n = rng.randint(0, MAX_NUMBER) if len(pairs) % 5 == 4 else sample_number(rng)
        if n in seen:
            continue
        seen.add(n)
        pairs.append((words(n, rng), n))
    held = [(w, n) for w, n in pairs if sum(c != "0" for c in str(n)) >= MIN_NONZERO]
    return held, seen


def few_nonzero_pairs(seed):
    """Every number with at most two nonzero digits (0, 1 .. 99, 3000, 2300000, 7000005, ...:
    the class too small to hold out), each with one written form."""
    rng = random.Random(seed)
    values = {0}
    for i in range(9):
        for a in range(1, 10):
            values.add(a * 10 ** i)
            for j in range(i):
                for b in range(1, 10):
                    values.add(a * 10 ** i + b * 10 ** j)
    return [(words(n, rng), n) for n in sorted(values)]


def export(model):
    tensors = {}
    for name, p in model.state_dict().items():
        if name.startswith("transformer."):
            name = name[len("transformer."):]
        tensors[name] = p.detach().to(torch.float16).contiguous().numpy()
    return tensors


def load_weights(model, path):
    """Loads a `model.safetensors` written by `export` (float16 or float32) into `model`."""
    from safetensors.numpy import load_file

    tensors = load_file(path)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            key = name[len("transformer."):] if name.startswith("transformer.") else name
            p.copy_(torch.from_numpy(tensors[key].astype(np.float32)))


def rust_config():
    return dict(
        d_model=ARCH["d_model"], heads=ARCH["heads"], encoder_layers=ARCH["encoder_layers"],
        decoder_layers=ARCH["decoder_layers"], d_ff=ARCH["d_ff"], src_vocab=len(SRC_SYMBOLS),
        tgt_vocab=len(TGT_SYMBOLS), share_embeddings=False, tie_output=False,
        max_src_len=MAX_SRC_LEN, max_tgt_len=MAX_TGT_LEN, max_beam=4, norm="pre",
        final_norm=True, activation="relu", positions="sinusoidal",
        biases=dict(attention_in=True, attention_out=True, ffn=True, generator=True),
        scale_embeddings=True, layer_norm_eps=1e-5, bos_id=BOS, eos_id=EOS, pad_id=PAD,
    )


def vocab_json():
    return dict(
        source=dict(
            symbols=SRC_SYMBOLS, pad_id=SRC_PAD, unk_id=SRC_UNK,
            tokenize=("lower-case the text, collapse every run of whitespace to one space and "
                      "trim both ends, then map each character to the index of the same symbol "
                      "in `symbols`; a character not in `symbols` maps to unk_id. No BOS or EOS "
                      "is added to the source."),
            max_len=MAX_SRC_LEN,
        ),
        target=dict(
            symbols=TGT_SYMBOLS, pad_id=PAD, bos_id=BOS, eos_id=EOS,
            detokenize=("concatenate the symbols of the generated ids before the first eos_id "
                        "(decoding starts from bos_id)"),
            max_len=MAX_TGT_LEN,
        ),
    )


def draw_batches(rng, size, held_numbers, count=16):
    """`count` training batches of `size` fresh examples, 80% from the sampler and 20% uniform
    over 0 .. MAX_NUMBER, held-out numbers excluded; drawn together and sorted by length so each
    batch pads little, then shuffled."""
    pairs = []
    while len(pairs) < size * count:
        n = sample_number(rng) if rng.random() < 0.8 else rng.randint(0, MAX_NUMBER)
        if n not in held_numbers:
            pairs.append((words(n, rng), n))
    pairs.sort(key=lambda p: len(p[0]))
    batches = [pairs[i * size: (i + 1) * size] for i in range(count)]
    rng.shuffle(batches)
    return batches


def train(args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed + 1)
    held, drawn = heldout_pairs(HELDOUT_SEED)
    held_numbers = drawn if args.exclude_drawn else {n for _, n in held}
    model = Seq2Seq(ARCH)
    if args.init:
        load_weights(model, args.init)
    params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {params} ({ARCH})", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = min(args.warmup, args.steps // 10)

    def lr_at(step):
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, args.steps - warmup)
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    seen_train, pool = [], []
    start = time.time()
    for step in range(args.steps):
        if not pool:
            pool = draw_batches(rng, args.batch, held_numbers)
        pairs = pool.pop()
        if len(seen_train) < HELDOUT:
            seen_train.extend(pairs[: HELDOUT - len(seen_train)])
        src, tgt_in, tgt_out = batch(pairs)
        logits = model(src, tgt_in)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % args.log_every == 0 or step == args.steps - 1:
            msg = f"step {step:5d}  loss {loss.item():.4f}  lr {sched.get_last_lr()[0]:.2e}  {time.time() - start:6.0f}s"
            if step % args.eval_every == 0 and step > 0:
                msg += f"  held-out[:500] {accuracy(model, held[:500]):.4f}"
            print(msg, flush=True)
    train_time = time.time() - start
    return model, held, seen_train, params, train_time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2800)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--init", help="start from these weights (a model.safetensors)")
    parser.add_argument("--exclude-drawn", action="store_true",
                        help="keep every drawn held-out candidate out of training, not only "
                             "the held-out set (the first stage of the committed model)")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    t0 = time.time()
    model, held, seen_train, params, train_time = train(args)
    for w, n in held:
        assert parse(w) == n, (w, n)

    acc_train32 = accuracy(model, seen_train) if seen_train else float("nan")
    acc_held32 = accuracy(model, held)
    tensors = export(model)
    # The float16 weights, back in a float32 model: what tessel loads.
    with torch.no_grad():
        for name, p in model.state_dict().items():
            key = name[len("transformer."):] if name.startswith("transformer.") else name
            p.copy_(torch.from_numpy(tensors[key].astype(np.float32)))
    acc_train16 = accuracy(model, seen_train) if seen_train else float("nan")
    acc_held16 = accuracy(model, held)
    few = few_nonzero_pairs(HELDOUT_SEED + 1)
    acc_few16 = accuracy(model, few)
    # The reference greedy paths, in float64 on the float16 weights.
    model64 = model.to(torch.float64)
    outs, margins = greedy(model64, [w for w, _ in held])
    acc_held64 = sum(detokenize(o) == str(n) and o[-1] == EOS for o, (_, n) in zip(outs, held)) / len(held)
    close = sum(m < FIXTURE_MARGIN for m in margins)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(rust_config(), f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "vocab.json"), "w") as f:
        json.dump(vocab_json(), f, indent=2)
        f.write("\n")
    save_file(tensors, os.path.join(args.out, "model.safetensors"))
    with open(os.path.join(args.out, "heldout.tsv"), "w") as f:
        for w, n in held:
            f.write(f"{w}\t{n}\n")
    with open(os.path.join(args.out, "pytorch_greedy.tsv"), "w") as f:
        for (w, _), o, m in zip(held, outs, margins):
            f.write(f"{w}\t{detokenize(o)}{'' if o and o[-1] == EOS else '?'}\t{m:.6f}\n")

    wrong = [(w, n, detokenize(o)) for o, (w, n) in zip(outs, held) if detokenize(o) != str(n)]
    for w, n, o in wrong[:20]:
        print(f"  wrong: {w!r} -> {o} (want {n})")
    print(f"parameters {params}; longest source {max(len(tokenize(w)) for w, _ in held)} chars "
          f"in held-out (grammar maximum {LONGEST_SOURCE})")
    print(f"exact match float32: train {acc_train32:.4f} ({len(seen_train)} first training "
          f"examples), held-out {acc_held32:.4f} ({len(held)})")
    print(f"exact match float16 weights: train {acc_train16:.4f}, held-out {acc_held16:.4f}; "
          f"float64 reference {acc_held64:.4f}; greedy paths with a top-2 gap under "
          f"{FIXTURE_MARGIN}: {close}")
    print(f"exact match float16 weights on all {len(few)} numbers with at most two nonzero "
          f"digits (not held out): {acc_few16:.4f}")
    print(f"training {train_time:.0f} s, total wall time {time.time() - t0:.0f} s "
          f"({args.threads} threads)")


if __name__ == "__main__":
    main()
