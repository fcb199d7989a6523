//! `tessel.Model` and `tessel.Session`: the token-level Rust API for research use. A model is
//! any directory tessel loads (translation or Whisper); a session is one sequence's arena over
//! it: `encode` (ids) or `encode_audio` (a log-mel spectrogram), `decode_step` (one token per
//! beam), `prefill`, `reorder_beams`, `generate`. The logits come back as a read-only numpy
//! array over the session's arena, without a copy ([`ArenaView`]): like the `&[f32]` the Rust
//! API lends, the next call on the session overwrites them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tessel_model::load::directory::{Directory, LoadSettings};
use tessel_model::{Limits, Model as EngineModel, Request, SearchOptions};

use crate::pool::lock;
use crate::{errors, settings};

type EngineSession = tessel_model::Session<Arc<EngineModel<'static>>>;

/// A loaded model, shared by its sessions.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct Model {
    model: Arc<EngineModel<'static>>,
    path: PathBuf,
}

#[pymethods]
impl Model {
    /// Loads a model directory (CTranslate2 or Hugging Face, any family tessel runs), planned
    /// for beams up to `max_beam` and, where the model stores no length, `max_length`.
    #[new]
    #[pyo3(signature = (model_path, *, compute_type="default", max_beam=4, max_length=512))]
    fn new(
        py: Python<'_>,
        model_path: PathBuf,
        compute_type: &str,
        max_beam: usize,
        max_length: usize,
    ) -> PyResult<Model> {
        let load = LoadSettings {
            max_beam,
            max_len: max_length,
            weights: settings::weights(compute_type)?,
        };
        let model = py.detach(|| {
            let directory = Directory::open(&model_path).map_err(errors::load)?;
            directory.load(&load).map_err(errors::load)
        })?;
        Ok(Model {
            model: Arc::new(model.model),
            path: model_path,
        })
    }

    /// The model's sizes and special ids: `d_model`, `heads`, `encoder_layers`,
    /// `decoder_layers`, `src_vocab`, `tgt_vocab`, `max_src_len`, `max_tgt_len`,
    /// `max_beam`, `bos_id` (the decoder start), `eos_id`, `pad_id`.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.model.config();
        let dict = PyDict::new(py);
        for (key, value) in [
            ("d_model", c.d_model),
            ("heads", c.heads),
            ("encoder_layers", c.encoder_layers),
            ("decoder_layers", c.decoder_layers),
            ("src_vocab", c.src_vocab),
            ("tgt_vocab", c.tgt_vocab),
            ("max_src_len", c.max_src_len),
            ("max_tgt_len", c.max_tgt_len),
            ("max_beam", c.max_beam),
        ] {
            dict.set_item(key, value)?;
        }
        dict.set_item("bos_id", c.bos_id)?;
        dict.set_item("eos_id", c.eos_id)?;
        dict.set_item("pad_id", c.pad_id)?;
        Ok(dict)
    }

    /// The model directory.
    #[getter]
    fn model_path(&self) -> PathBuf {
        self.path.clone()
    }

    /// A new session over this model, its products on `intra_threads` threads (0: every
    /// core). Its arena is planned and allocated here, once.
    #[pyo3(signature = (intra_threads=0))]
    fn session(slf: &Bound<'_, Self>, intra_threads: usize) -> PyResult<Session> {
        let model = Arc::clone(&slf.get().model);
        let limits = Limits::of(model.config()).with_threads(settings::threads(intra_threads));
        let session =
            EngineSession::with_limits(model, settings::isa()?, limits).map_err(errors::run)?;
        Ok(Session {
            model: slf.clone().unbind(),
            inner: Mutex::new(session),
        })
    }
}

/// One sequence's state over a model (its beams share the source).
#[pyclass(module = "tessel._tessel", frozen)]
pub struct Session {
    model: Py<Model>,
    inner: Mutex<EngineSession>,
}

#[pymethods]
impl Session {
    /// Encodes source token ids; resets the decoder.
    fn encode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<()> {
        py.detach(|| lock(&self.inner).encode(&ids))
            .map_err(errors::input)
    }

    /// Encodes a log-mel spectrogram (Whisper): a `n_mels × frames` array (anything
    /// `numpy.ascontiguousarray` takes, read as float32); resets the decoder.
    fn encode_audio(&self, py: Python<'_>, mel: &Bound<'_, PyAny>) -> PyResult<()> {
        let numpy = py.import("numpy")?;
        let array = numpy.call_method1("ascontiguousarray", (mel, "<f4"))?;
        let raw = array.call_method0("tobytes")?;
        let bytes = raw.cast::<PyBytes>()?.as_bytes();
        if bytes.len() % 4 != 0 {
            return Err(errors::input(
                "mel bytes: not a whole number of float32 values",
            ));
        }
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        py.detach(|| lock(&self.inner).encode_audio(&values))
            .map_err(errors::input)
    }

    /// Decodes one position per beam (`tokens[i]` continues beam `i`); returns the logits,
    /// `beams × tgt_vocab`, over the arena.
    fn decode_step(slf: &Bound<'_, Self>, tokens: Vec<u32>) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        slf.py()
            .detach(|| lock(&this.inner).decode_step(&tokens).map(|_| ()))
            .map_err(errors::input)?;
        Session::logits(slf)
    }

    /// Feeds a forced target prefix as one beam; returns the logits after its last token
    /// (`1 × tgt_vocab`) over the arena.
    fn prefill(slf: &Bound<'_, Self>, tokens: Vec<u32>) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        slf.py()
            .detach(|| lock(&this.inner).prefill(&tokens).map(|_| ()))
            .map_err(errors::input)?;
        Session::logits(slf)
    }

    /// Makes beam `i` continue the history of beam `parents[i]`.
    fn reorder_beams(&self, py: Python<'_>, parents: Vec<u32>) -> PyResult<()> {
        py.detach(|| lock(&self.inner).reorder_beams(&parents))
            .map_err(errors::input)
    }

    /// Forgets the decoded positions; the encoded source stays.
    fn reset_decoder(&self) {
        lock(&self.inner).reset_decoder();
    }

    /// Greedy (`beam_size=1`) or beam search over the encoded source from `prefix` (default:
    /// the decoder start token) for at most `max_steps` tokens after it: the finished
    /// hypotheses, best first, as `(tokens, score)` (EOS included when produced; the score is
    /// the summed log-probability over `length ** length_penalty`). No decoding rule of a
    /// generation config applies: the families' rules are `Translator.translate`'s.
    #[pyo3(signature = (beam_size=1, max_steps=64, *, prefix=None, length_penalty=1.0))]
    fn generate(
        &self,
        py: Python<'_>,
        beam_size: usize,
        max_steps: usize,
        prefix: Option<Vec<u32>>,
        length_penalty: f32,
    ) -> PyResult<Vec<(Vec<u32>, f32)>> {
        let options = SearchOptions {
            length_penalty,
            ..SearchOptions::beam(beam_size, max_steps)
        };
        py.detach(|| {
            let mut session = lock(&self.inner);
            let mut request = Request::new(options);
            if let Some(prefix) = &prefix {
                request = request.prefix(prefix);
            }
            let hyps = session.generate(request)?;
            Ok(hyps.iter().map(|h| (h.tokens.to_vec(), h.score)).collect())
        })
        .map_err(|e: tessel_model::RunError| errors::input(e))
    }

    /// The logits of the last decoder step (`beams × tgt_vocab`) over the arena.
    #[getter]
    fn logits(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        let (address, rows, cols) = {
            let session = lock(&this.inner);
            let logits = session.logits();
            let cols = session.model().config().tgt_vocab;
            (logits.as_ptr() as usize, logits.len() / cols.max(1), cols)
        };
        let view = ArenaView {
            _session: slf.clone().unbind(),
            address,
            shape: (rows, cols),
        };
        let py = slf.py();
        let numpy = py.import("numpy")?;
        Ok(numpy.call_method1("asarray", (view,))?.unbind())
    }

    /// Decoder positions fed since the last encode or reset.
    #[getter]
    fn position(&self) -> usize {
        lock(&self.inner).position()
    }

    /// Length of the encoded source (`None` before the first encode).
    #[getter]
    fn source_len(&self) -> Option<usize> {
        lock(&self.inner).source_len()
    }

    /// The session's model.
    #[getter]
    fn model(&self, py: Python<'_>) -> Py<Model> {
        self.model.clone_ref(py)
    }
}

/// `rows × cols` float32 values in a session's arena, shown to numpy through
/// `__array_interface__` (no copy, read-only). It holds the session, so the arena outlives
/// every array over it; the session's next call overwrites the values.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct ArenaView {
    _session: Py<Session>,
    address: usize,
    shape: (usize, usize),
}

#[pymethods]
impl ArenaView {
    /// numpy's array interface, version 3: the shape, little-endian float32, the address
    /// and read-only.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("shape", self.shape)?;
        dict.set_item("typestr", "<f4")?;
        dict.set_item("data", (self.address, true))?;
        dict.set_item("version", 3)?;
        Ok(dict)
    }
}
