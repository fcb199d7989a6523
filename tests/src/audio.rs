//! Test audio built from a speech clip at 16 kHz, as the batched fixtures' script builds it.

/// Samples per second of the test audio.
pub const SAMPLE_RATE: f64 = 16_000.0;

/// `seconds` of silence.
pub fn silence(seconds: f64) -> Vec<f32> {
    vec![0.0; (seconds * SAMPLE_RATE).round() as usize]
}

/// The fixtures' `gaps` audio: `clip` five times, with silences of 6, 0.3, 12 and 3 seconds
/// between them.
pub fn gaps(clip: &[f32]) -> Vec<f32> {
    [
        clip,
        &silence(6.0),
        clip,
        &silence(0.3),
        clip,
        &silence(12.0),
        clip,
        &silence(3.0),
        clip,
    ]
    .concat()
}
