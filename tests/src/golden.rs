//! Reading reference outputs from golden fixtures and holding a session to them.

use safetensors::{Dtype, SafeTensors};
use tessel_model::{Model, Session};

/// Tensor `name` of a fixture file as `f64` (stored as F32, F64 or I64); panics naming the
/// tensor when it is absent or of another dtype (a broken fixture, not a test outcome).
pub fn values(file: &SafeTensors<'_>, name: &str) -> Vec<f64> {
    let view = file
        .tensor(name)
        .unwrap_or_else(|_| panic!("fixture tensor {name}"));
    let data = view.data();
    match view.dtype() {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64)
            .collect(),
        other => panic!("fixture tensor {name}: dtype {other:?}"),
    }
}

/// Tensor `name` as token ids.
pub fn ids(file: &SafeTensors<'_>, name: &str) -> Vec<u32> {
    values(file, name).iter().map(|&v| v as u32).collect()
}

/// Feeds `forced` one decoder step at a time (beam 1, after an encode) and checks every step's
/// logits against `expected` (`forced.len() × vocab`, row-major) within `1e-4` of the largest
/// expected logit's magnitude (at least 1).
pub fn assert_teacher_forced_logits(
    session: &mut Session<&Model>,
    forced: &[u32],
    expected: &[f64],
    what: &str,
) {
    let vocab = session.model().config().tgt_vocab;
    assert_teacher_forced_columns(session, forced, expected, vocab, what);
}

/// As [`assert_teacher_forced_logits`], for references of `columns` logits a step: the first
/// `columns` of each step's logits are compared (a model may have outputs the reference lacks).
pub fn assert_teacher_forced_columns(
    session: &mut Session<&Model>,
    forced: &[u32],
    expected: &[f64],
    columns: usize,
    what: &str,
) {
    assert!(
        expected.len() >= forced.len() * columns,
        "{what}: the reference has fewer than {} steps of {columns}",
        forced.len()
    );
    let scale = expected.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let bound = 1e-4 * scale;
    for (step, &token) in forced.iter().enumerate() {
        let logits = session.decode_step(&[token]).unwrap();
        assert!(
            logits.len() >= columns,
            "{what}: step {step} has {} logits",
            logits.len()
        );
        let want = &expected[step * columns..(step + 1) * columns];
        let worst = logits
            .iter()
            .zip(want)
            .map(|(&g, &w)| (g as f64 - w).abs())
            .fold(0.0f64, f64::max);
        assert!(
            worst <= bound,
            "{what}: step {step} logits differ by {worst} (bound {bound})"
        );
    }
}
