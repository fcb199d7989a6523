//! What a host sees of a transcription while it runs: the inference marks around every model
//! call, the progress through the audio and each segment once it is final.

use std::time::{Duration, Instant};

use super::types::Segment;

/// What a host may watch during a transcription.
pub trait Observer {
    /// Model inference starts (`true`) or stops (`false`): a host counting allocations
    /// counts between the two.
    fn inference(&mut self, _running: bool) {}
    /// `done` of `total` seconds of audio are transcribed.
    fn progress(&mut self, _done: f64, _total: f64) {}
    /// `segment` is final: it is the transcript's next segment, and no later window changes
    /// it (called outside the inference marks, so a host may print it as it comes).
    fn segment(&mut self, _segment: &Segment) {}
    /// The language is known (given, English-only, or detected on the first window, with its
    /// probability), before the first window is transcribed.
    fn language(&mut self, _code: &str, _probability: f64) {}
    /// Asked before each 30 s window: `true` ends the transcription with
    /// [`TranscribeError::Stopped`](super::TranscribeError::Stopped) (a host whose reader went
    /// away).
    fn stop(&mut self) -> bool {
        false
    }
}

/// An observer that watches nothing.
impl Observer for () {}

/// Runs the model call `run` between the observer's inference marks and adds the time it took
/// to `spent`.
pub(super) fn timed<T>(
    observer: &mut dyn Observer,
    spent: &mut Duration,
    run: impl FnOnce() -> T,
) -> T {
    let started = Instant::now();
    observer.inference(true);
    let out = run();
    observer.inference(false);
    *spent += started.elapsed();
    out
}
