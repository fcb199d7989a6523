//! The bounds of the command line's values: clap value parsers that turn an option's text
//! into a checked value (a beam width, a thread count, a finite or positive number, a
//! probability, a weight type) or say what is wrong with it.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use tessel_model::{EarlyStopping, WeightType};

/// Widest beam `translate` and `transcribe` accept: wider beams cost arena and time in
/// proportion and no published generation config asks for more.
pub const MAX_BEAM: usize = 64;

/// Threads per available core `--threads` accepts at most.
pub const THREADS_PER_CORE: usize = 4;

/// The most threads `--threads` accepts here: [`THREADS_PER_CORE`] × the cores available
/// (`std::thread::available_parallelism`; 1 core when unknown), and the core count.
pub fn max_threads() -> (usize, usize) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (cores.saturating_mul(THREADS_PER_CORE), cores)
}

/// A thread count: at least 1, at most [`max_threads`].
pub(crate) fn threads(text: &str) -> Result<usize, String> {
    let n = positive(text)?;
    let (max, cores) = max_threads();
    if n > max {
        return Err(format!(
            "{n} is more than {max}, {THREADS_PER_CORE} × the {cores} cores available"
        ));
    }
    Ok(n)
}

/// Most texts one batched session decodes together.
pub const MAX_BATCH_SIZE: usize = 256;

/// A batch size in `1..=MAX_BATCH_SIZE`.
pub(crate) fn batch_size(text: &str) -> Result<usize, String> {
    match positive(text)? {
        n if n <= MAX_BATCH_SIZE => Ok(n),
        n => Err(format!("{n} is more than {MAX_BATCH_SIZE}")),
    }
}

/// A beam width in `1..=MAX_BEAM`.
pub(crate) fn beam(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_BEAM).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is outside 1..={MAX_BEAM}")),
        Err(e) => Err(format!("not a count: {e}")),
    }
}

/// A finite number.
pub(crate) fn finite(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err("must be finite".to_owned()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

/// A finite number, as `f64`.
pub(crate) fn finite_f64(text: &str) -> Result<f64, String> {
    finite(text)?;
    text.parse::<f64>()
        .map_err(|e| format!("not a number: {e}"))
}

/// A finite number above 0.
pub(crate) fn positive_float(text: &str) -> Result<f32, String> {
    match finite(text)? {
        v if v > 0.0 => Ok(v),
        _ => Err("must be above 0".to_owned()),
    }
}

/// A finite number of at least 0.
pub(crate) fn non_negative_float(text: &str) -> Result<f32, String> {
    match finite(text)? {
        v if v >= 0.0 => Ok(v),
        _ => Err("must not be negative".to_owned()),
    }
}

/// A probability in (0, 1].
pub(crate) fn probability(text: &str) -> Result<f32, String> {
    match finite(text)? {
        v if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("must be above 0 and at most 1".to_owned()),
    }
}

/// A probability in [0, 1], as `f64`.
pub(crate) fn unit_interval(text: &str) -> Result<f64, String> {
    match finite_f64(text)? {
        v if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err("must be between 0 and 1".to_owned()),
    }
}

/// `true`, `false` or `never`.
pub(crate) fn early_stopping(text: &str) -> Result<EarlyStopping, String> {
    match text {
        "true" => Ok(EarlyStopping::WhenFull),
        "false" => Ok(EarlyStopping::Heuristic),
        "never" => Ok(EarlyStopping::Never),
        _ => Err("must be true, false or never".to_owned()),
    }
}

/// `A,B` (or `A`): a factor of at least 0 and a count.
pub(crate) fn length_ratio(text: &str) -> Result<(f32, usize), String> {
    let (a, b) = text.split_once(',').unwrap_or((text, "0"));
    let a = non_negative_float(a.trim())?;
    let b = b
        .trim()
        .parse::<usize>()
        .map_err(|e| format!("B is not a count: {e}"))?;
    Ok((a, b))
}

/// A count of at least 1.
pub(crate) fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count: {e}")),
    }
}

/// The weight types by name, each with its help line.
pub(crate) fn weight_type_parser() -> impl TypedValueParser<Value = WeightType> {
    PossibleValuesParser::new(WeightType::ALL.map(|t| {
        PossibleValue::new(t.name()).help(match t {
            WeightType::F32 => "32-bit floats: the file's values exactly",
            WeightType::F16 => "IEEE half precision: half the bytes of f32",
            WeightType::Bf16 => "bfloat16: half the bytes of f32, f32's range",
            WeightType::Bf16Dot => {
                "bfloat16, activations rounded to bfloat16 inside each product \
                 (AVX-512 BF16 dot products where the CPU has them)"
            }
            WeightType::Int8 => {
                "int8, one scale per output channel; activations quantised per row, \
                 exact integer sums (a quarter of the bytes of f32)"
            }
        })
    }))
    .try_map(|name| name.parse::<WeightType>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beams_and_threads_are_bounded() {
        assert_eq!(beam("5"), Ok(5));
        assert_eq!(beam("64"), Ok(64));
        assert_eq!(beam("0"), Err("0 is outside 1..=64".to_owned()));
        assert_eq!(beam("1000"), Err("1000 is outside 1..=64".to_owned()));
        let (max, cores) = max_threads();
        assert_eq!(max, cores * THREADS_PER_CORE);
        assert_eq!(threads(&max.to_string()), Ok(max));
        let over = threads(&(max + 1).to_string()).unwrap_err();
        assert!(over.contains(&format!("more than {max}")), "{over}");
        assert!(threads("0").is_err());
    }

    #[test]
    fn counts_must_be_positive_numbers() {
        assert_eq!(positive("3"), Ok(3));
        assert!(positive("0").is_err());
        assert!(positive("-1").is_err());
        assert!(positive("three").is_err());
    }
}
