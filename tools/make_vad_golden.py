#!/usr/bin/env python3
"""Builds the golden fixtures of tessel-vad from faster-whisper's Silero VAD (onnxruntime).

Speech comes from Debian's espeak-ng (22050 Hz), resampled to 16 kHz by linear interpolation
(any samples do: the fixture is what both sides read), with silences and Gaussian noise from a
fixed seed. It writes, under vad/tests/fixtures/:

  clip_a.wav   7.0 s: two sentences 2.6 s apart over faint noise (the default 2 s minimum
               silence splits them)
  clip_b.wav   4.0 s + 490 samples: three phrases with short gaps in louder noise; its length
               leaves 490 samples in the last window, so faster-whisper's zeroing of the last
               64 samples of the padded audio drops real samples
  clip_c.wav   1.28 s = 40 windows exactly: one word; padding adds a whole window of zeros
  vad_golden.json  for each clip:
      probabilities  faster_whisper.vad.get_vad_model()(padded) as get_speech_timestamps calls
                     it (the audio padded with zeros by 512 - len % 512), onnxruntime, float32
      timestamps     get_speech_timestamps(audio, VadOptions(**options)) for each entry of
                     OPTIONS (options as given to VadOptions; absent = default)
      chunks         collect_chunks(audio, default timestamps, max_duration=d) for d in
                     MAX_DURATIONS: each piece's sample count and metadata
      original_times SpeechTimestampsMap(default timestamps, 16000).get_original_time(t,
                     is_end=e) for a grid of times

All WAVs are mono 16-bit PCM; the references read them back as int16 / 32768 in float32, as
tessel-audio's WAV reader does. Setup: `apt-get install -y espeak-ng`, `pip install
faster-whisper onnxruntime numpy` (faster-whisper 1.2.1 ships silero_vad_v6.onnx, the file
committed as assets/silero_vad_v6.onnx). The Rust tests never need Python.
"""

import io
import json
import os
import subprocess
import tempfile
import wave

import numpy as np
import faster_whisper
from faster_whisper.vad import (
    SpeechTimestampsMap,
    VadOptions,
    collect_chunks,
    get_speech_timestamps,
    get_vad_model,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vad", "tests", "fixtures")
RATE = 16000
OPTIONS = [
    {},
    {"threshold": 0.3, "min_silence_duration_ms": 300, "speech_pad_ms": 100,
     "min_speech_duration_ms": 250},
    {"max_speech_duration_s": 1.5, "min_silence_duration_ms": 500, "neg_threshold": 0.2},
    {"threshold": 0.7, "min_silence_duration_ms": 0, "speech_pad_ms": 0},
    {"max_speech_duration_s": 0.8, "min_silence_duration_ms": 100, "speech_pad_ms": 30},
]
MAX_DURATIONS = [float("inf"), 1.0, 2.5]


def speak(text, speed=160, pitch=50):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.wav")
        subprocess.run(["espeak-ng", "-s", str(speed), "-p", str(pitch), "-w", path, text],
                       check=True)
        with wave.open(path) as w:
            rate = w.getframerate()
            data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)
    data /= 32768.0
    t = np.arange(int(len(data) * RATE / rate)) / RATE
    return np.interp(t, np.arange(len(data)) / rate, data)


def place(length, parts, noise, seed):
    rng = np.random.default_rng(seed)
    audio = rng.normal(0.0, noise, length)
    for start, clip in parts:
        end = min(length, start + len(clip))
        audio[start:end] += clip[: end - start]
    return np.clip(audio, -1.0, 32767 / 32768)


def write_wav(path, audio):
    pcm = np.round(audio * 32768.0).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    return pcm.astype(np.float32) / np.float32(32768.0)


def main():
    os.makedirs(OUT, exist_ok=True)
    first = speak("The quick brown fox jumps over the lazy dog.")
    second = speak("Voice activity detection finds the speech.", speed=175, pitch=40)
    words = [speak(w, speed=190) for w in ("one", "two three", "four")]
    clips = {
        "clip_a": place(7 * RATE, [(int(0.3 * RATE), first),
                                   (int(0.3 * RATE) + len(first) + int(2.6 * RATE), second)],
                        0.002, 1),
        "clip_b": place(4 * RATE + 490, [(int(0.2 * RATE), words[0]),
                                         (int(1.2 * RATE), words[1]),
                                         (int(2.9 * RATE), words[2])], 0.02, 2),
        "clip_c": place(40 * 512, [(int(0.1 * RATE), speak("hello", speed=150))], 0.001, 3),
    }
    model = get_vad_model()
    golden = {"faster_whisper": faster_whisper.__version__, "clips": {}}
    for name, audio in clips.items():
        audio = write_wav(os.path.join(OUT, name + ".wav"), audio)
        padded = np.pad(audio, (0, 512 - audio.shape[0] % 512))
        probabilities = model(padded)
        entry = {
            "samples": int(len(audio)),
            "probabilities": [float(p) for p in probabilities],
            "timestamps": [],
        }
        for options in OPTIONS:
            speech = get_speech_timestamps(audio, VadOptions(**options))
            entry["timestamps"].append({
                "options": options,
                "speech": [[int(s["start"]), int(s["end"])] for s in speech],
            })
        default = get_speech_timestamps(audio, VadOptions())
        entry["chunks"] = []
        for max_duration in MAX_DURATIONS:
            pieces, metadata = collect_chunks(audio, default, max_duration=max_duration)
            entry["chunks"].append({
                "max_duration": None if max_duration == float("inf") else max_duration,
                "lengths": [int(len(p)) for p in pieces],
                "metadata": [{"offset": m["offset"], "duration": m["duration"],
                              "segments": [[s["start"], s["end"]] for s in m["segments"]]}
                             for m in metadata],
            })
        ts_map = SpeechTimestampsMap(default, RATE)
        times = []
        if default:
            speech_len = sum(s["end"] - s["start"] for s in default) / RATE
            ends = np.cumsum([s["end"] - s["start"] for s in default]) / RATE
            grid = sorted(set([round(float(x), 3) for x in np.linspace(0.0, speech_len, 23)]
                              + [float(e) for e in ends]))
            for t in grid:
                for is_end in (False, True):
                    times.append([t, is_end, ts_map.get_original_time(t, is_end=is_end)])
        entry["original_times"] = times
        golden["clips"][name] = entry
        print(name, len(audio), "samples;", [t["speech"] for t in entry["timestamps"]])
    with open(os.path.join(OUT, "vad_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
