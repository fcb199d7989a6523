"""Ray Data steps that hold one tessel model per actor: `map_batches` over a dataset of WAV
paths or of texts, on one machine or a Ray cluster (python/README.md has the recipe).

    import ray, ray.data
    from tessel.ray import Transcribe, Translate

    ray.init()                        # a cluster: ray.init(address="auto")
    texts = (ray.data.from_items([{"path": p} for p in wav_paths])
             .map_batches(Transcribe, fn_constructor_args=(whisper_dir,),
                          batch_size=1, concurrency=4, num_cpus=1)
             .take_all())

Ray pickles these classes by reference, so every worker imports `tessel`: install the package
on every machine of the cluster.
"""

import numpy as np

from . import Translator, WhisperModel


class Transcribe:
    """Adds `text` (the transcript) to a batch with a `path` column of WAV files; `options`
    go to `WhisperModel.transcribe`. One model per actor, on `cpu_threads` threads."""

    def __init__(self, model_dir, cpu_threads=1, **options):
        self.model = WhisperModel(model_dir, cpu_threads=cpu_threads)
        self.options = options

    def __call__(self, batch):
        texts = []
        for path in batch["path"]:
            segments, _ = self.model.transcribe(str(path), **self.options)
            texts.append("".join(s.text for s in segments))
        batch["text"] = np.array(texts, dtype=object)
        return batch


class Translate:
    """Adds `translation` to a batch with a `text` column, with `Translator.translate`. One
    model per actor, its batches on `intra_threads` threads."""

    def __init__(self, model_dir, src_lang=None, tgt_lang=None, intra_threads=1, **options):
        self.translator = Translator(model_dir, intra_threads=intra_threads)
        self.languages = (src_lang, tgt_lang)
        self.options = options

    def __call__(self, batch):
        texts = [str(t) for t in batch["text"]]
        out = self.translator.translate(texts, *self.languages, **self.options)
        batch["translation"] = np.array(out, dtype=object)
        return batch
