//! `tessel.BatchedInferencePipeline`'s engine: faster-whisper's batched transcription over a
//! [`WhisperModel`]'s transcriber.
//!
//! [`BatchedPipeline::start`] starts one transcription on a thread of its own, as
//! [`WhisperModel`]'s `start` does, and returns a [`SegmentStream`] once the chunks are cut
//! and the language is known (or the call failed before: then it raises). The thread holds a
//! batched session of the model's (`batch_size` slots, planned for the call's beam and word
//! timing) until the stream ends or is dropped (then it stops before its next batch of
//! chunks); the model keeps `num_workers` of them between calls, apart from its sequential
//! sessions. The keyword arguments are python/tessel/whisper.py's `BatchedInferencePipeline`'s,
//! already reduced to what the batched pipeline reads.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

use pyo3::prelude::*;
use tessel_kernels::Isa;
use tessel_pipeline::transcribe::{
    BatchedOptions, BatchedSession, Observer, Segment, TranscribeError, TranscribeOptions,
    Transcriber, Vad,
};

use crate::errors;
use crate::pool::Pool;
use crate::whisper::{
    task_of, Audio, Message, SegmentStream, VadTuple, WhisperModel, AHEAD, MAX_BEAM, SAMPLE_RATE,
};

/// What a batched session was planned for: its widest beam, its slots, and whether it times
/// words.
pub type BatchedShape = (usize, usize, bool);

/// Most chunks decoded together. A larger `batch_size` runs in batches of this many: a chunk's
/// result does not depend on the chunks it is batched with, so only the memory and the speed
/// differ.
const MAX_SLOTS: usize = 64;

/// faster-whisper's `BatchedInferencePipeline` over a model.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct BatchedPipeline {
    model: Py<WhisperModel>,
}

#[pymethods]
impl BatchedPipeline {
    /// The batched pipeline of `model` (sharing its transcriber, its detector and its batched
    /// sessions with every other pipeline over it).
    #[new]
    fn new(model: Py<WhisperModel>) -> BatchedPipeline {
        BatchedPipeline { model }
    }

    /// Starts transcribing `audio` (as `WhisperModel.start` takes it) in chunks of at most
    /// 30 s decoded `batch_size` at a time: the caller's clips when `clip_timestamps` holds
    /// any (start, end, … seconds), else the speech the detector finds with `vad` (its options,
    /// final) when `vad_filter`, else the whole audio when it is shorter than 30 s. Only the
    /// first temperature is given: the batched pipeline decodes at it (beam search or greedy,
    /// never sampling) and segments report it.
    #[pyo3(signature = (audio, *, language, task, beam_size, patience, length_penalty,
        repetition_penalty, no_repeat_ngram_size, temperature, initial_prompt, suppress_blank,
        suppress_tokens, without_timestamps, word_timestamps, prepend_punctuations,
        append_punctuations, multilingual, vad_filter, vad, max_new_tokens, clip_timestamps,
        batch_size, hotwords))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        audio: Bound<'_, PyAny>,
        language: Option<String>,
        task: &str,
        beam_size: usize,
        patience: f32,
        length_penalty: f32,
        repetition_penalty: f32,
        no_repeat_ngram_size: usize,
        temperature: f32,
        initial_prompt: Option<String>,
        suppress_blank: bool,
        suppress_tokens: Vec<i64>,
        without_timestamps: bool,
        word_timestamps: bool,
        prepend_punctuations: String,
        append_punctuations: String,
        multilingual: bool,
        vad_filter: bool,
        vad: Option<VadTuple>,
        max_new_tokens: Option<usize>,
        clip_timestamps: Vec<f64>,
        batch_size: usize,
        hotwords: Option<String>,
    ) -> PyResult<SegmentStream> {
        let model = self.model.get();
        if beam_size == 0 || beam_size > MAX_BEAM {
            return Err(errors::input(format!(
                "beam_size: expected 1 to {MAX_BEAM}"
            )));
        }
        if batch_size == 0 {
            return Err(errors::input("batch_size: expected 1 or more"));
        }
        let options = TranscribeOptions {
            task: task_of(task)?,
            language,
            beam: beam_size,
            temperatures: vec![temperature],
            initial_prompt,
            hotwords,
            repetition_penalty,
            no_repeat_ngram_size,
            max_new_tokens,
            suppress_tokens,
            clip_timestamps,
            timestamps: !without_timestamps,
            suppress_blank,
            length_penalty,
            patience,
            word_timestamps,
            prepend_punctuations,
            append_punctuations,
            ..TranscribeOptions::default()
        };
        let slots = batch_size.min(MAX_SLOTS);
        let mut batched = BatchedOptions {
            batch_size: slots,
            multilingual,
            vad_filter,
            ..BatchedOptions::default()
        };
        let detector = match vad.filter(|_| vad_filter) {
            Some(parameters) => {
                let (detector, parameters) = model.vad_with(parameters)?;
                batched.vad = parameters;
                Some(detector)
            }
            None => None,
        };
        let audio = Audio::of(&audio)?;
        let (sender, receiver) = sync_channel(AHEAD);
        let job = Job {
            transcriber: Arc::clone(&model.transcriber),
            pool: Arc::clone(&model.batched),
            isa: model.isa,
            threads: model.threads,
            shape: (beam_size, slots, word_timestamps),
            vad: detector,
        };
        std::thread::Builder::new()
            .name("tessel-batched".into())
            .spawn(move || job.run(audio, (options, batched), sender))
            .map_err(errors::run)?;
        SegmentStream::open(py, receiver)
    }
}

/// What the transcription thread needs.
struct Job {
    transcriber: Arc<Transcriber>,
    pool: Arc<Pool<BatchedShape, BatchedSession>>,
    isa: Isa,
    threads: usize,
    shape: BatchedShape,
    /// With `vad_filter`: the detector.
    vad: Option<Arc<Vad>>,
}

impl Job {
    /// Transcribes `audio` on a pooled batched session, telling `sender` as it goes.
    fn run(
        self,
        audio: Audio,
        options: (TranscribeOptions, BatchedOptions),
        sender: SyncSender<Message>,
    ) {
        let done = self.transcribe(audio, &options, &sender);
        // The reader may be gone: nothing is left to tell.
        let _ = sender.send(Message::Done(done));
    }

    fn transcribe(
        &self,
        audio: Audio,
        (options, batched): &(TranscribeOptions, BatchedOptions),
        sender: &SyncSender<Message>,
    ) -> Result<(), TranscribeError> {
        let samples = audio.samples()?;
        let (beam, slots, words) = self.shape;
        let mut session = self.pool.take_now(self.shape, || {
            let shape = (beam, slots);
            self.transcriber
                .batched_session(self.isa, shape, self.threads, words)
        })?;
        let mut observer = Sending {
            sender,
            duration: samples.len() as f64 / SAMPLE_RATE,
            language: None,
            words,
            gone: false,
        };
        let vad = self.vad.as_deref();
        let result = session.transcribe(&samples, options, batched, vad, &mut observer);
        self.pool.put(self.shape, session);
        result.map(drop)
    }
}

/// Sends the language (with the seconds transcribed) and each final segment, its times
/// already the audio's, to the stream; stops the transcription when the stream is gone.
struct Sending<'a> {
    sender: &'a SyncSender<Message>,
    duration: f64,
    /// The language and its probability, known but not sent yet.
    language: Option<(String, f64)>,
    /// Whether the segments' words are timed.
    words: bool,
    gone: bool,
}

impl Observer for Sending<'_> {
    fn language(&mut self, code: &str, probability: f64) {
        self.language = Some((code.to_owned(), probability));
    }

    /// The first call, before the first batch, gives the chunks' seconds in all:
    /// faster-whisper's `duration_after_vad` (sample counts over 16 kHz, summed per chunk
    /// here: as the whole count over 16 kHz, exactly as faster-whisper divides it).
    fn progress(&mut self, _done: f64, total: f64) {
        if let Some((code, probability)) = self.language.take() {
            let after = (total * SAMPLE_RATE).round() / SAMPLE_RATE;
            let message = Message::Language(code, probability, self.duration, after);
            self.gone |= self.sender.send(message).is_err();
        }
    }

    fn segment(&mut self, segment: &Segment) {
        let message = Message::Segment(segment.clone(), self.words);
        self.gone |= self.sender.send(message).is_err();
    }

    fn stop(&mut self) -> bool {
        self.gone
    }
}
