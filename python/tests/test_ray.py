"""The Ray Data recipe of python/README.md (`tessel.ray`) on a local two-CPU cluster: a folder
of WAV files transcribed and a text file translated by actors that each hold one model; the
results equal the single-process ones. Skipped where Ray is not installed."""

import wave

import numpy as np
import pytest

import tessel
from conftest import TESTS, decoding_expected, read_wav

ray = pytest.importorskip("ray")
ray_data = pytest.importorskip("ray.data")
from tessel.ray import Transcribe, Translate  # noqa: E402

WHISPER = str(TESTS / "transcribe" / "tiny_en_32" / "model")


def write_wav(path, samples):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.clip(samples, -1, 1 - 2**-15) * 32768).astype("<i2").tobytes())


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


def test_ray_data_transcribes_a_folder_as_one_process_does(cluster, tmp_path):
    clip = read_wav(TESTS / "transcribe" / "clip.wav")
    for n, part in enumerate([clip, clip[: len(clip) // 2], np.concatenate([clip, clip])]):
        write_wav(tmp_path / ("%d.wav" % n), part)
    paths = sorted(str(p) for p in tmp_path.glob("*.wav"))
    rows = (
        ray_data.from_items([{"path": p} for p in paths])
        .map_batches(Transcribe, fn_constructor_args=(WHISPER,),
                     fn_constructor_kwargs=dict(beam_size=1), batch_size=1, concurrency=2,
                     num_cpus=1)
        .take_all()
    )
    alone = tessel.WhisperModel(WHISPER)
    want = {p: "".join(s.text for s in alone.transcribe(p, beam_size=1)[0]) for p in paths}
    assert {r["path"]: r["text"] for r in rows} == want


def test_ray_data_translates_a_text_file_as_one_process_does(cluster, decoding_dir, tmp_path):
    model = str(decoding_dir("nllb"))
    expected = decoding_expected("nllb")
    texts = [line["text"] for line in expected["pipeline"]] * 3
    path = tmp_path / "in.txt"
    path.write_text("\n".join(texts) + "\n")
    languages = (expected["languages"]["src_lang"], expected["languages"]["tgt_lang"])
    rows = (
        ray_data.read_text(str(path))
        # Half a CPU per actor: the file's read task needs a CPU beside the two actors.
        .map_batches(Translate, fn_constructor_args=(model, *languages), batch_size=4,
                     concurrency=2, num_cpus=0.5)
        .take_all()
    )
    want = tessel.Translator(model).translate(texts, *languages)
    assert sorted((r["text"], r["translation"]) for r in rows) == sorted(zip(texts, want))
