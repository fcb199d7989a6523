#!/usr/bin/env python3
"""Writes the WAV seeds of the `wav` fuzz target that cover the RIFF walker's cases.

    python3 tools/make_wav_seeds.py            # writes fuzz/seeds/wav/riff-*

Each seed is a mode byte 0 (the target reads the rest as a file) and a small WAV file of
0.05 s of a 440 Hz tone (16 kHz, 16-bit mono): an odd LIST chunk with its pad byte and
without it, before and after fmt; streamed sizes (0xFFFFFFFF and 0, as ffmpeg writes to a
pipe); a data size beyond the end of the file with a trailing half frame; 64-bit float and
WAVE_FORMAT_EXTENSIBLE (24 valid bits in 32-bit containers); and inputs tessel refuses
(MS-ADPCM, 5 ms of audio, a cut inside a LIST chunk, block align mismatch).

For the files Python's `wave` module reads (PCM only), the script checks that it returns the
tone's samples, the reference that `audio/tests/suite/wav.rs` holds tessel to: the same samples as
the well-formed file.
"""

import io
import math
import struct
import wave
from pathlib import Path

SEEDS = Path(__file__).resolve().parent.parent / "fuzz" / "seeds" / "wav"
RATE = 16_000
TONE = [round(12_000 * math.sin(2 * math.pi * 440 * i / RATE)) for i in range(800)]
PCM = struct.pack(f"<{len(TONE)}h", *TONE)
GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


def fmt(tag=1, channels=1, bits=16, block=None):
    block = block if block is not None else channels * ((bits + 7) // 8)
    return struct.pack("<HHIIHH", tag, channels, RATE, RATE * block, block, bits)


def extensible(sub, container, valid):
    base = fmt(0xFFFE, 1, container)
    return base + struct.pack("<HHI", 22, valid, 4) + struct.pack("<H", sub) + GUID_TAIL


def chunk(cid, body, size=None, pad=True):
    size = len(body) if size is None else size
    out = cid + struct.pack("<I", size) + body
    return out + b"\0" if pad and len(body) % 2 else out


def riff(*chunks, size=None):
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body) if size is None else size) + body


LIST = b"INFOISFT\x05\x00\x00\x00tessl"  # 17 bytes: odd

CASES = {
    "riff-list-odd-padded": riff(chunk(b"fmt ", fmt()), chunk(b"LIST", LIST), chunk(b"data", PCM)),
    "riff-list-odd-unpadded": riff(
        chunk(b"fmt ", fmt()), chunk(b"LIST", LIST, pad=False), chunk(b"data", PCM)
    ),
    "riff-list-odd-padded-before-fmt": riff(
        chunk(b"LIST", LIST), chunk(b"fmt ", fmt()), chunk(b"data", PCM)
    ),
    "riff-list-odd-unpadded-before-fmt": riff(
        chunk(b"LIST", LIST, pad=False), chunk(b"fmt ", fmt()), chunk(b"data", PCM)
    ),
    "riff-streamed-ffffffff": riff(
        chunk(b"fmt ", fmt()), chunk(b"data", PCM, size=0xFFFFFFFF), size=0xFFFFFFFF
    ),
    "riff-streamed-zero": riff(chunk(b"fmt ", fmt()), chunk(b"data", PCM, size=0), size=0),
    "riff-data-longer-than-file": riff(
        chunk(b"fmt ", fmt()), chunk(b"data", PCM + b"\x7f", size=2 * len(PCM), pad=False)
    ),
    "riff-float64": riff(
        chunk(b"fmt ", fmt(3, 1, 64)),
        chunk(b"data", struct.pack(f"<{len(TONE)}d", *(v / 32768 for v in TONE))),
    ),
    "riff-extensible-24-in-32": riff(
        chunk(b"fmt ", extensible(1, 32, 24)),
        chunk(b"data", struct.pack(f"<{len(TONE)}i", *(v << 16 for v in TONE))),
    ),
    "riff-ms-adpcm": riff(chunk(b"fmt ", fmt(2, 1, 4, 256)), chunk(b"data", bytes(256))),
    "riff-5ms": riff(chunk(b"fmt ", fmt()), chunk(b"data", PCM[:160])),
    "riff-cut-inside-list": riff(chunk(b"fmt ", fmt()), chunk(b"LIST", LIST, size=1000)),
    "riff-block-align-mismatch": riff(chunk(b"fmt ", fmt(block=3)), chunk(b"data", PCM)),
}

# The seeds Python's `wave` reads the same tone from (whole frames). It reads PCM only, refuses
# an unpadded odd chunk (it reads the chunk after it one byte late) and a RIFF size of 0.
PYTHON_READS_THE_TONE = [
    "riff-list-odd-padded",
    "riff-list-odd-padded-before-fmt",
    "riff-streamed-ffffffff",
    "riff-data-longer-than-file",
]


def python_frames(data):
    with wave.open(io.BytesIO(data)) as w:
        raw = w.readframes(w.getnframes())
    whole = len(raw) // 2
    return list(struct.unpack(f"<{whole}h", raw[: 2 * whole]))


def main():
    SEEDS.mkdir(parents=True, exist_ok=True)
    for name, data in CASES.items():
        (SEEDS / name).write_bytes(b"\x00" + data)
    for name in PYTHON_READS_THE_TONE:
        assert python_frames(CASES[name]) == TONE, name
    print(f"wrote {len(CASES)} seeds to {SEEDS}; Python's wave reads the tone from "
          f"{', '.join(PYTHON_READS_THE_TONE)}")


if __name__ == "__main__":
    main()
