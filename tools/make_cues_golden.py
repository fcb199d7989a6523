#!/usr/bin/env python3
"""Builds the subtitle-cue golden fixtures: tests/transcribe/<name>/cues.json.

Runs openai-whisper's own subtitle writers (`whisper.utils.WriteSRT` and `WriteVTT`, whose
`iterate_result` lays words out in cues) on the segments and words of
tests/transcribe/<name>/words.json (faster-whisper's `word_timestamps=True` runs, made by
tools/make_words_golden.py: every run of tiny_multi_32, the greedy run of tiny_en_32, which the
CLI test transcribes), with each set of its word options (`max_line_width`, `max_line_count`,
`highlight_words`, `max_words_per_line`), and saves the text each writes.

openai-whisper's `whisper/utils.py` needs only the standard library; it is loaded from the
installed `whisper` package or, without one (its package imports torch), from the file
WHISPER_UTILS names, e.g. from the sdist:
    pip download --no-deps openai-whisper==20250625 && tar xzf openai_whisper-20250625.tar.gz
    WHISPER_UTILS=openai_whisper-20250625/whisper/utils.py python3 tools/make_cues_golden.py
The Rust tests never need Python.
"""

import importlib.util
import io
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "transcribe")
RUNS = {"tiny_multi_32": None, "tiny_en_32": ["greedy"]}
OPTIONS = {
    "default": {},
    "words_1": dict(max_words_per_line=1),
    "words_2": dict(max_words_per_line=2),
    "width_8_count_2": dict(max_line_width=8, max_line_count=2),
    "width_12": dict(max_line_width=12),
    "highlight": dict(highlight_words=True),
    "highlight_words_2": dict(highlight_words=True, max_words_per_line=2),
    "width_6_count_1_highlight": dict(max_line_width=6, max_line_count=1, highlight_words=True),
}


def utils():
    path = os.environ.get("WHISPER_UTILS")
    if path is None:
        import whisper.utils as module
        return module
    spec = importlib.util.spec_from_file_location("whisper_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    u = utils()
    for name, runs in RUNS.items():
        build(u, name, runs)


def build(u, name, runs):
    with open(os.path.join(ROOT, name, "words.json")) as f:
        words = json.load(f)
    out = dict(name=name, runs={})
    for run_name, run in words["runs"].items():
        if runs is not None and run_name not in runs:
            continue
        result = dict(segments=[
            dict(start=s["start"], end=s["end"], text=s["text"],
                 words=[dict(word=w[0], start=w[1], end=w[2], probability=w[3])
                        for w in s["words"]])
            for s in run["segments"]
        ])
        written = {}
        for option_name, options in OPTIONS.items():
            for fmt, writer in (("srt", u.WriteSRT), ("vtt", u.WriteVTT)):
                buffer = io.StringIO()
                writer(".").write_result(result, buffer, options)
                written[f"{option_name}.{fmt}"] = buffer.getvalue()
        out["runs"][run_name] = written
        print(name, run_name, len(result["segments"]), "segments",
              sum(len(s["words"]) for s in result["segments"]), "words")
    with open(os.path.join(ROOT, name, "cues.json"), "w") as f:
        json.dump(dict(out, options=OPTIONS), f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
