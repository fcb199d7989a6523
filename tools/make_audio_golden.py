#!/usr/bin/env python3
"""Builds the golden fixtures of tessel-audio from openai-whisper's log-mel front end.

Speech comes from Debian's espeak-ng (22050 Hz, mono, 16-bit). From one utterance it writes,
under audio/tests/fixtures/:

  speech_16k_s16_mono.wav    1.6 s, resampled to 16 kHz by sox (`rate -v`): whisper's own rate,
                             so the Rust front end sees exactly the samples whisper sees
  speech_22k_s16_stereo.wav  1.0 s at 22050 Hz; left = the utterance, right = 0.6 x the
                             utterance delayed by 37 samples (so the mix-down is not trivial)
  speech_22k_f32_mono.wav    0.8 s at 22050 Hz, IEEE float, 0.8 x the utterance
  speech_44k_s16_mono.wav    0.7 s, upsampled by sox to 44100 Hz
  mel_golden.safetensors     the references below (F32 tensors; metadata holds the scalars)

References (all from whisper 20250625's `whisper.audio`, float32 torch on CPU):

  filters.{80,128}.{start,len,values}  whisper's assets/mel_filters.npz, stored sparsely: for
        mel bin m the nonzero weights are values[off_m : off_m + len[m]] at FFT bins
        start[m] .. start[m] + len[m] (off_m = the sum of the earlier lens); the script checks
        every weight outside these spans is exactly 0
  s16k.mel80 / s16k.mel128  log_mel_spectrogram(pad_or_trim(audio), n) for the 16 kHz clip,
        frames [0, K) where K is the first frame whose window holds no sample of the clip;
        metadata `s16k.tail80` / `s16k.tail128` is the value of every frame >= K (checked
        equal here), `s16k.samples` the clip length
  long.window1_tail / long.window2  the transcribe path (log_mel_spectrogram(audio,
        padding=N_SAMPLES), then `pad_or_trim(mel[:, seek:seek+segment_size], N_FRAMES)`) for a
        31 s signal: zeros with the 16 kHz clip at sample 0 and at sample 470400 (29.4 s; it
        straddles the 30 s boundary): frames 2950..3000 of the first window and the 100
        content frames of the second (seek 3000); every later frame of the second window is 0
  s22k_stereo.mel80, s22k_f32.mel80, s44k.mel80: log_mel_spectrogram(pad_or_trim(
        whisper.load_audio(path)), 80) (ffmpeg resamples to 16 kHz and mixes down), frames
        [0, K) as above; these measure tessel's resampler (rubato) against ffmpeg's

It also prints how far torch's float32 mel is from a float64 evaluation of the same formula
(numpy FFT in float64), which is the scale of tolerance the Rust tests can hope for.

Setup: `apt-get install -y espeak-ng sox ffmpeg`, `pip install openai-whisper numpy safetensors`
(torch comes with openai-whisper). Checked with espeak-ng 1.51, sox 14.4.2, ffmpeg 5.1,
openai-whisper 20250625, torch 2.15.0. The Rust tests never need Python: they read the
committed fixtures.
"""

import os
import struct
import subprocess
import tempfile

import numpy as np
import torch
import whisper
from safetensors.numpy import save_file
from whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "audio", "tests", "fixtures")
TEXT = "Tessel turns speech into text, one window at a time."
HOP = 160
N_FFT = 400


def write_wav(path, rate, frames, encoding):
    """Writes a WAVE file with a plain 16-byte fmt chunk. `frames` is [n, channels] float64
    in [-1, 1) for "s16", or the float32 samples for "f32"."""
    frames = np.atleast_2d(frames.T).T
    channels = frames.shape[1]
    if encoding == "s16":
        data = np.clip(np.round(frames * 32768.0), -32768, 32767).astype("<i2").tobytes()
        tag, bits = 1, 16
    elif encoding == "f32":
        data = frames.astype("<f4").tobytes()
        tag, bits = 3, 32
    else:
        raise ValueError(encoding)
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(body)) + body)


def read_s16_mono(path):
    """The samples of a 16-bit mono WAVE file, as whisper scales them (x / 32768)."""
    import wave

    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2, path
        raw = w.readframes(w.getnframes())
        return w.getframerate(), np.frombuffer(raw, "<i2").astype(np.float64) / 32768.0


def sox_rate(src, dst, rate):
    subprocess.run(["sox", src, "-b", "16", dst, "rate", "-v", str(rate)], check=True)


def speech_onset(x):
    """The sample where the speech starts (first |x| above 1 % of the peak), less 20 ms."""
    rate_guard = 441
    first = int(np.argmax(np.abs(x) > 0.01 * np.abs(x).max()))
    return max(0, first - rate_guard)


def content_end_frame(n_samples):
    """The first STFT frame (centre t * HOP, window [t*HOP - 200, t*HOP + 200)) that holds no
    sample of a clip of n_samples followed by zeros."""
    return (n_samples + N_FFT // 2 + HOP - 1) // HOP


def mel_frames(audio, n_mels):
    """whisper's mel of one 30 s window, split into the frames that see the clip and the
    constant tail."""
    mel = log_mel_spectrogram(pad_or_trim(torch.from_numpy(audio.astype(np.float32))), n_mels)
    mel = mel.numpy()
    assert mel.shape == (n_mels, N_FRAMES)
    k = content_end_frame(len(audio))
    tail = mel[:, k:]
    assert np.all(tail == tail[0, 0]), "frames past the clip must all be equal"
    return np.ascontiguousarray(mel[:, :k]), float(tail[0, 0])


def mel_f64(audio, filters):
    """The same formula in float64 (numpy FFT), for the error scale of torch's float32."""
    x = np.zeros(N_SAMPLES)
    x[: len(audio)] = audio[:N_SAMPLES]
    x = np.pad(x, N_FFT // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP][:N_FRAMES]
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2
    mel = filters.astype(np.float64) @ power.T
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)
    return (log + 4.0) / 4.0


def sparse_filters(dense, n_mels, tensors):
    starts, lens, values = [], [], []
    for m in range(n_mels):
        nz = np.nonzero(dense[m])[0]
        lo, hi = (int(nz[0]), int(nz[-1]) + 1) if len(nz) else (0, 0)
        outside = np.concatenate([dense[m, :lo], dense[m, hi:]])
        assert np.all(outside == 0.0)
        starts.append(lo)
        lens.append(hi - lo)
        values.append(dense[m, lo:hi])
    tensors[f"filters.{n_mels}.start"] = np.array(starts, dtype=np.int32)
    tensors[f"filters.{n_mels}.len"] = np.array(lens, dtype=np.int32)
    tensors[f"filters.{n_mels}.values"] = np.concatenate(values).astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    tensors, meta = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "espeak.wav")
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "165", "-w", src, TEXT], check=True)
        rate, speech = read_s16_mono(src)
        assert rate == 22050
        speech = speech[speech_onset(speech):]

        # 16 kHz mono, 16-bit: whisper's own input format.
        up16 = os.path.join(tmp, "16k.wav")
        sox_rate(src, up16, 16000)
        _, s16 = read_s16_mono(up16)
        s16 = s16[int(speech_onset(s16) * 1.0):][: int(1.6 * 16000)]
        path16 = os.path.join(OUT, "speech_16k_s16_mono.wav")
        write_wav(path16, 16000, s16, "s16")
        audio16 = whisper.load_audio(path16)
        assert np.array_equal(audio16, (np.round(s16 * 32768) / 32768).astype(np.float32))
        meta["s16k.samples"] = str(len(audio16))

        with np.load(os.path.join(os.path.dirname(whisper.__file__), "assets",
                                  "mel_filters.npz")) as npz:
            dense = {n: npz[f"mel_{n}"] for n in (80, 128)}
        for n in (80, 128):
            sparse_filters(dense[n], n, tensors)
            mel, tail = mel_frames(audio16, n)
            tensors[f"s16k.mel{n}"] = mel
            meta[f"s16k.tail{n}"] = repr(tail)
            ref64 = mel_f64(audio16, dense[n])
            full = log_mel_spectrogram(pad_or_trim(torch.from_numpy(audio16)), n).numpy()
            print(f"mel{n}: |torch f32 - float64 formula| max {np.abs(full - ref64).max():.3g}"
                  f" mean {np.abs(full - ref64).mean():.3g}")

        # The transcribe path over a 31 s signal (two windows).
        long = np.zeros(496_000, dtype=np.float32)
        long[: len(audio16)] = audio16
        long[470_400 : 470_400 + len(audio16)] = audio16
        mel = log_mel_spectrogram(torch.from_numpy(long), 80, padding=N_SAMPLES).numpy()
        content = mel.shape[-1] - N_FRAMES
        assert content == len(long) // HOP == 3100
        w1 = pad_or_trim(torch.from_numpy(mel[:, 0:N_FRAMES]), N_FRAMES).numpy()
        seg2 = min(N_FRAMES, content - 3000)
        w2 = pad_or_trim(torch.from_numpy(mel[:, 3000 : 3000 + seg2]), N_FRAMES).numpy()
        assert np.all(w2[:, seg2:] == 0.0)
        tensors["long.window1_tail"] = np.ascontiguousarray(w1[:, 2950:3000])
        tensors["long.window2"] = np.ascontiguousarray(w2[:, :seg2])
        meta["long.samples"] = str(len(long))
        meta["long.offset2"] = "470400"

        # Other rates and encodings: whisper reads them through ffmpeg (resampled to 16 kHz,
        # mixed down to mono, rounded to 16-bit).
        s22 = speech
        stereo = np.zeros((int(1.0 * 22050), 2))
        stereo[:, 0] = s22[: len(stereo)]
        stereo[37:, 1] = 0.6 * s22[: len(stereo) - 37]
        f32 = (0.8 * s22[: int(0.8 * 22050)]).astype(np.float32)
        up44 = os.path.join(tmp, "44k.wav")
        sox_rate(src, up44, 44100)
        _, s44 = read_s16_mono(up44)
        s44 = s44[speech_onset(s44):][: int(0.7 * 44100)]
        variants = [
            ("s22k_stereo", "speech_22k_s16_stereo.wav", 22050, stereo, "s16"),
            ("s22k_f32", "speech_22k_f32_mono.wav", 22050, f32, "f32"),
            ("s44k", "speech_44k_s16_mono.wav", 44100, s44, "s16"),
        ]
        for key, name, rate, frames, encoding in variants:
            path = os.path.join(OUT, name)
            write_wav(path, rate, frames, encoding)
            audio = whisper.load_audio(path)
            mel, tail = mel_frames(audio, 80)
            tensors[f"{key}.mel80"] = mel
            meta[f"{key}.tail80"] = repr(tail)
            meta[f"{key}.samples16k"] = str(len(audio))

    out = os.path.join(OUT, "mel_golden.safetensors")
    save_file(tensors, out, metadata=meta)
    total = 0
    for name in sorted(os.listdir(OUT)):
        size = os.path.getsize(os.path.join(OUT, name))
        total += size
        print(f"{name:32} {size:8} bytes")
    print(f"{'total':32} {total:8} bytes")


if __name__ == "__main__":
    main()
