//! `tessel.WhisperModel`'s engine: a Whisper model and a pool of transcription sessions.
//!
//! [`WhisperModel::start`] starts one transcription on a thread of its own and returns a
//! [`SegmentStream`] once the language is known (or the options, the audio or the model were
//! refused: then it raises). The stream yields each segment as soon as it is final; the
//! thread runs at most a few segments ahead of the reader (a bounded channel), and stops
//! before its next 30 s window when the stream is dropped. It holds a session until then:
//! streams open at once (read in turns, or not read yet) each hold one, past `num_workers` if
//! need be (never waiting on one another), and the pool keeps `num_workers` between calls.
//! The keyword arguments and the segment and info types of faster-whisper are
//! python/tessel/whisper.py's.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tessel_audio::{load_wav, read_wav, ReadOptions};
use tessel_kernels::Isa;
use tessel_pipeline::transcribe::{
    BatchedSession, Observer, Segment, Speech, TranscribeError, TranscribeOptions,
    TranscribeSession, Transcriber, Vad, VadOptions,
};
use tessel_text::whisper::Task;

use crate::batched::BatchedShape;
use crate::pool::{lock, Pool};
use crate::{errors, settings};

/// Widest beam (and `best_of`) a call may ask for: the width the model is loaded for.
pub(crate) const MAX_BEAM: usize = 32;

/// Segments the transcription may run ahead of the reader.
pub(crate) const AHEAD: usize = 4;

/// Samples per second of the audio Whisper reads.
pub(crate) const SAMPLE_RATE: f64 = 16_000.0;

/// A Whisper model and its sessions.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct WhisperModel {
    pub(crate) transcriber: Arc<Transcriber>,
    pool: Arc<Pool<Shape, TranscribeSession>>,
    /// The batched sessions of the `tessel.BatchedInferencePipeline`s over the model (at most
    /// `num_workers` kept, as for `pool`).
    pub(crate) batched: Arc<Pool<BatchedShape, BatchedSession>>,
    pub(crate) isa: Isa,
    pub(crate) threads: usize,
    /// The voice activity detector, opened at the first `vad_filter=True` call.
    vad: OnceLock<Arc<Vad>>,
}

/// faster-whisper's `VadOptions` as the Python side passes them: `(threshold, neg_threshold,
/// min_speech_duration_ms, max_speech_duration_s, min_silence_duration_ms, speech_pad_ms)`.
pub(crate) type VadTuple = (f64, Option<f64>, u64, f64, u64, u64);

/// What a pooled session was planned for: its widest beam, and whether it times words.
type Shape = (usize, bool);

/// A running transcription: its language and duration, and its segments as they come.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct SegmentStream {
    receiver: Mutex<Receiver<Message>>,
    /// The language's code.
    #[pyo3(get)]
    language: String,
    /// The probability of the detected language (1 when given or English-only).
    #[pyo3(get)]
    language_probability: f64,
    /// Seconds of audio.
    #[pyo3(get)]
    duration: f64,
    /// Seconds of audio transcribed: the speech with `vad_filter`, else all of it.
    #[pyo3(get)]
    duration_after_vad: f64,
}

/// What the transcription thread tells the stream.
pub(crate) enum Message {
    /// The language and its probability, and the audio's duration before and after the
    /// voice activity detection.
    Language(String, f64, f64, f64),
    /// A final segment, and whether its words were timed.
    Segment(Segment, bool),
    /// The end, or why it failed.
    Done(Result<(), TranscribeError>),
}

/// A segment as the Python side builds faster-whisper's `Segment` from it: `(seek, start,
/// end, text, tokens, temperature, avg_logprob, compression_ratio, no_speech_prob, words)`,
/// `words` `None` unless word timestamps were asked for.
type SegmentTuple = (
    usize,
    f64,
    f64,
    String,
    Vec<u32>,
    f32,
    f64,
    f64,
    f64,
    Option<Vec<WordTuple>>,
);

/// A timed word as the Python side builds faster-whisper's `Word` from it: `(start, end,
/// word, probability)`.
type WordTuple = (f64, f64, String, f64);

#[pymethods]
impl WhisperModel {
    /// Loads a Whisper model directory (CTranslate2 with its tokenizer, or Hugging Face) with
    /// its weights as `compute_type` says, transcribing on `cpu_threads` threads (0: every
    /// core), at most `num_workers` transcriptions at once. `multilingual` overrides what the
    /// vocabulary says (`None`: the full 51,865-token vocabulary is multilingual); an
    /// English-only directory cannot be made multilingual.
    #[new]
    #[pyo3(signature = (model_path, compute_type="default", cpu_threads=0, num_workers=1,
        multilingual=None))]
    fn new(
        py: Python<'_>,
        model_path: PathBuf,
        compute_type: &str,
        cpu_threads: usize,
        num_workers: usize,
        multilingual: Option<bool>,
    ) -> PyResult<WhisperModel> {
        let weights = settings::weights(compute_type)?;
        let mut transcriber = py
            .detach(|| Transcriber::load(&model_path, MAX_BEAM, weights))
            .map_err(errors::transcribe)?;
        if let Some(multilingual) = multilingual {
            transcriber = transcriber
                .try_multilingual(multilingual)
                .map_err(errors::transcribe)?;
        }
        Ok(WhisperModel {
            transcriber: Arc::new(transcriber),
            pool: Arc::new(Pool::new(num_workers)),
            batched: Arc::new(Pool::new(num_workers)),
            isa: settings::isa()?,
            threads: settings::threads(cpu_threads),
            vad: OnceLock::new(),
        })
    }

    /// Whether the model takes language and task tokens.
    #[getter]
    fn is_multilingual(&self) -> bool {
        self.transcriber.is_multilingual()
    }

    /// Starts transcribing `audio`: a WAV file's path, `("wav", bytes)` (a WAV file's
    /// contents), or the bytes of little-endian `float32` samples at 16 kHz, mono.
    #[pyo3(signature = (audio, *, language, task, beam_size, best_of, length_penalty,
        temperatures, compression_ratio_threshold, log_prob_threshold, no_speech_threshold,
        condition_on_previous_text, prompt_reset_on_temperature, initial_prompt, suppress_blank,
        without_timestamps, max_initial_timestamp, word_timestamps, prepend_punctuations,
        append_punctuations, vad, initial_prompt_tokens=None, hotwords=None, prefix=None,
        repetition_penalty=1.0, no_repeat_ngram_size=0, max_new_tokens=None,
        suppress_tokens=vec![-1], clip_timestamps=vec![], patience=1.0,
        hallucination_silence_threshold=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        audio: Bound<'_, PyAny>,
        language: Option<String>,
        task: &str,
        beam_size: usize,
        best_of: usize,
        length_penalty: f32,
        temperatures: Vec<f32>,
        compression_ratio_threshold: Option<f64>,
        log_prob_threshold: Option<f64>,
        no_speech_threshold: Option<f64>,
        condition_on_previous_text: bool,
        prompt_reset_on_temperature: f32,
        initial_prompt: Option<String>,
        suppress_blank: bool,
        without_timestamps: bool,
        max_initial_timestamp: f64,
        word_timestamps: bool,
        prepend_punctuations: String,
        append_punctuations: String,
        vad: Option<VadTuple>,
        initial_prompt_tokens: Option<Vec<u32>>,
        hotwords: Option<String>,
        prefix: Option<String>,
        repetition_penalty: f32,
        no_repeat_ngram_size: usize,
        max_new_tokens: Option<usize>,
        suppress_tokens: Vec<i64>,
        clip_timestamps: Vec<f64>,
        patience: f32,
        hallucination_silence_threshold: Option<f64>,
    ) -> PyResult<SegmentStream> {
        let task = task_of(task)?;
        let mut options = TranscribeOptions {
            task,
            language,
            beam: beam_size,
            best_of,
            temperatures,
            condition_on_previous_text,
            prompt_reset_on_temperature,
            initial_prompt,
            initial_prompt_tokens,
            hotwords,
            prefix,
            repetition_penalty,
            no_repeat_ngram_size,
            max_new_tokens,
            suppress_tokens,
            clip_timestamps,
            timestamps: !without_timestamps,
            max_initial_timestamp,
            suppress_blank,
            length_penalty,
            patience,
            hallucination_silence_threshold,
            word_timestamps,
            prepend_punctuations,
            append_punctuations,
            ..TranscribeOptions::default()
        };
        options.thresholds.compression_ratio = compression_ratio_threshold;
        options.thresholds.logprob = log_prob_threshold;
        options.thresholds.no_speech = no_speech_threshold;
        let beam = beam_size.max(best_of);
        if beam == 0 || beam > MAX_BEAM {
            return Err(errors::input(format!(
                "beam_size and best_of: expected 1 to {MAX_BEAM}"
            )));
        }
        let vad = vad.map(|options| self.vad_with(options)).transpose()?;
        let audio = Audio::of(&audio)?;
        let (sender, receiver) = sync_channel(AHEAD);
        let job = Job {
            transcriber: Arc::clone(&self.transcriber),
            pool: Arc::clone(&self.pool),
            isa: self.isa,
            threads: self.threads,
            shape: (beam, word_timestamps),
            vad,
        };
        std::thread::Builder::new()
            .name("tessel-transcribe".into())
            .spawn(move || job.run(audio, options, sender))
            .map_err(errors::run)?;
        SegmentStream::open(py, receiver)
    }
}

/// faster-whisper's `task`.
pub(crate) fn task_of(task: &str) -> PyResult<Task> {
    match task {
        "transcribe" => Ok(Task::Transcribe),
        "translate" => Ok(Task::Translate),
        other => Err(errors::input(format!(
            "task {other:?}: expected \"transcribe\" or \"translate\""
        ))),
    }
}

impl SegmentStream {
    /// The stream of the transcription that tells `receiver`, once it has told its language
    /// (waiting without the GIL); its error if it failed before.
    pub(crate) fn open(py: Python<'_>, receiver: Receiver<Message>) -> PyResult<SegmentStream> {
        let receiver = Mutex::new(receiver);
        let first = py.detach(|| lock(&receiver).recv());
        match first {
            Ok(Message::Language(language, language_probability, duration, after)) => {
                Ok(SegmentStream {
                    receiver,
                    language,
                    language_probability,
                    duration,
                    duration_after_vad: after,
                })
            }
            Ok(Message::Done(Err(error))) => Err(errors::transcribe(error)),
            Ok(_) | Err(_) => Err(errors::run(
                "the transcription stopped before it reached its language",
            )),
        }
    }
}

impl WhisperModel {
    /// The detector (opened once: the built-in Silero VAD v6) with `options`, checked.
    pub(crate) fn vad_with(&self, options: VadTuple) -> PyResult<(Arc<Vad>, VadOptions)> {
        let (threshold, neg_threshold, min_speech, max_speech_s, min_silence, pad) = options;
        let options = VadOptions {
            threshold,
            neg_threshold,
            min_speech_duration_ms: min_speech,
            max_speech_duration_s: max_speech_s,
            min_silence_duration_ms: min_silence,
            speech_pad_ms: pad,
        };
        options
            .check()
            .map_err(|e| errors::input(format!("vad_parameters: {e}")))?;
        let vad = match self.vad.get() {
            Some(vad) => Arc::clone(vad),
            None => {
                let vad = tessel_pipeline::transcribe::open_vad(None)
                    .map_err(|e| errors::transcribe(e.into()))?
                    .with_isa(self.isa);
                Arc::clone(self.vad.get_or_init(|| Arc::new(vad)))
            }
        };
        Ok((vad, options))
    }
}

#[pymethods]
impl SegmentStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next final segment; `None` (the end of iteration) after the last.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<SegmentTuple>> {
        let next = py.detach(|| lock(&self.receiver).recv());
        match next {
            Ok(Message::Segment(s, timed)) => {
                let words = timed.then(|| {
                    let words = s.words.into_iter();
                    words
                        .map(|w| (w.start, w.end, w.word, w.probability))
                        .collect()
                });
                Ok(Some((
                    s.seek,
                    s.start,
                    s.end,
                    s.text,
                    s.tokens,
                    s.temperature,
                    s.avg_logprob,
                    s.compression_ratio,
                    s.no_speech_prob,
                    words,
                )))
            }
            Ok(Message::Done(Err(error))) => Err(errors::transcribe(error)),
            // The end, and every later call after it (the sender is gone).
            Ok(Message::Done(Ok(()))) | Err(_) => Ok(None),
            Ok(Message::Language(..)) => Err(errors::run("a second language message")),
        }
    }
}

/// The audio to transcribe.
pub(crate) enum Audio {
    /// A WAV file, read (and resampled to 16 kHz mono) on the transcription's thread.
    Path(PathBuf),
    /// A WAV file's bytes, read as a file's.
    Wav(Vec<u8>),
    /// Samples at 16 kHz.
    Samples(Vec<f32>),
}

impl Audio {
    /// A path (`str` or `os.PathLike`), the bytes of `float32` samples, or `("wav", bytes)`:
    /// a WAV file's contents (a file object's).
    pub(crate) fn of(audio: &Bound<'_, PyAny>) -> PyResult<Audio> {
        if let Ok((kind, bytes)) = audio.extract::<(String, Bound<'_, PyBytes>)>() {
            if kind == "wav" {
                return Ok(Audio::Wav(bytes.as_bytes().to_vec()));
            }
        }
        if let Ok(bytes) = audio.cast::<PyBytes>() {
            let bytes = bytes.as_bytes();
            if bytes.len() % 4 != 0 {
                return Err(errors::input(format!(
                    "{} bytes of audio are not whole float32 samples",
                    bytes.len()
                )));
            }
            let samples = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            return Ok(Audio::Samples(samples));
        }
        match audio.extract::<PathBuf>() {
            Ok(path) => Ok(Audio::Path(path)),
            Err(_) => Err(PyTypeError::new_err(
                "audio: expected a path to a WAV file or a float32 array of 16 kHz samples",
            )),
        }
    }

    pub(crate) fn samples(self) -> Result<Vec<f32>, TranscribeError> {
        match self {
            Audio::Samples(samples) => Ok(samples),
            Audio::Path(path) => Ok(load_wav(&path, &ReadOptions::default())?.samples),
            Audio::Wav(bytes) => Ok(read_wav(bytes.as_slice(), &ReadOptions::default())?.samples),
        }
    }
}

/// What the transcription thread needs.
struct Job {
    transcriber: Arc<Transcriber>,
    pool: Arc<Pool<Shape, TranscribeSession>>,
    isa: Isa,
    threads: usize,
    shape: Shape,
    /// With `vad_filter`: the detector and its options.
    vad: Option<(Arc<Vad>, VadOptions)>,
}

impl Job {
    /// Transcribes `audio` on a pooled session, telling `sender` as it goes.
    fn run(self, audio: Audio, options: TranscribeOptions, sender: SyncSender<Message>) {
        let done = self.transcribe(audio, &options, &sender);
        // The reader may be gone: nothing is left to tell.
        let _ = sender.send(Message::Done(done));
    }

    fn transcribe(
        &self,
        audio: Audio,
        options: &TranscribeOptions,
        sender: &SyncSender<Message>,
    ) -> Result<(), TranscribeError> {
        let samples = audio.samples()?;
        let speech = match &self.vad {
            Some((vad, options)) => Some(Speech::find(vad, &samples, options)?),
            None => None,
        };
        let duration = samples.len() as f64 / SAMPLE_RATE;
        let Some(heard) = speech.as_ref().map_or(Some(&samples[..]), |s| {
            (!s.samples.is_empty()).then_some(&s.samples[..])
        }) else {
            // No speech: no segments, as faster-whisper gives; the language is the one given
            // (English for an English-only model), else unknown.
            let language = match (&options.language, self.transcriber.is_multilingual()) {
                (Some(language), _) => language.clone(),
                (None, false) => "en".to_owned(),
                (None, true) => String::new(),
            };
            let _ = sender.send(Message::Language(language, 1.0, duration, 0.0));
            return Ok(());
        };
        let (beam, words) = self.shape;
        let mut session = self.pool.take_now(self.shape, || match words {
            true => self
                .transcriber
                .session_with_words(self.isa, beam, self.threads),
            false => self.transcriber.session(self.isa, beam, self.threads),
        })?;
        let mut observer = Sending {
            sender,
            duration,
            duration_after_vad: heard.len() as f64 / SAMPLE_RATE,
            speech: speech.as_ref(),
            words,
            gone: false,
        };
        let result = session.transcribe(heard, options, &mut observer);
        self.pool.put(self.shape, session);
        result.map(drop)
    }
}

/// Sends the language and each final segment to the stream; stops the transcription when the
/// stream is gone.
struct Sending<'a> {
    sender: &'a SyncSender<Message>,
    duration: f64,
    duration_after_vad: f64,
    /// With `vad_filter`: the speech, whose map takes segment times back to the audio's.
    speech: Option<&'a Speech>,
    /// Whether the segments' words are timed.
    words: bool,
    gone: bool,
}

impl Observer for Sending<'_> {
    fn language(&mut self, code: &str, probability: f64) {
        let (duration, after) = (self.duration, self.duration_after_vad);
        let message = Message::Language(code.to_owned(), probability, duration, after);
        self.gone |= self.sender.send(message).is_err();
    }

    fn segment(&mut self, segment: &Segment) {
        let segment = match self.speech {
            Some(speech) => speech.restore(segment),
            None => segment.clone(),
        };
        let message = Message::Segment(segment, self.words);
        self.gone |= self.sender.send(message).is_err();
    }

    fn stop(&mut self) -> bool {
        self.gone
    }
}
