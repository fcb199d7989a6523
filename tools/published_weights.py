"""The weight generator that tools/make_published_golden.py and the Rust conformance tests
(`tests/src/published.rs`) share, so that checkpoints of published dimensions (hundreds of MB)
are rebuilt at test time instead of committed.

Element i of a tensor is `offset + scale * (2 u - 1)` rounded to float32, where u in [0, 1)
is the top 53 bits of SplitMix64 at state `fnv1a64(name) + seed + i` (wrapping, 64-bit)
times 2^-53. `name` is the generator name of the tensor (the parameter it was drawn for),
`offset` and `scale` come from the manifest. Every step is integer arithmetic or one IEEE
double operation, so both sides produce the same bits.
"""

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
CHUNK = 1 << 22


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def splitmix64(state):
    """SplitMix64's output for each state (uint64 array), the increment included."""
    z = state + GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform(name, seed, count):
    """`count` doubles in [-1, 1) for generator name `name`."""
    base = np.uint64((fnv1a64(name) + seed) & 0xFFFFFFFFFFFFFFFF)
    out = np.empty(count, dtype=np.float64)
    with np.errstate(over="ignore"):
        for start in range(0, count, CHUNK):
            n = min(CHUNK, count - start)
            state = base + np.arange(start, start + n, dtype=np.uint64)
            bits = splitmix64(state) >> np.uint64(11)
            out[start:start + n] = bits.astype(np.float64) * (2.0 ** -53) * 2.0 - 1.0
    return out


def generate(entry, seed):
    """The float32 array a manifest entry describes."""
    shape = entry["shape"]
    count = int(np.prod(shape)) if shape else 1
    values = entry["offset"] + entry["scale"] * uniform(entry["gen"], seed, count)
    array = values.astype(np.float32).reshape(shape)
    for row in entry.get("zero_rows", []):
        array[row] = 0.0
    for index, value in entry.get("set", []):
        array.reshape(-1)[index] = np.float32(value)
    return array
