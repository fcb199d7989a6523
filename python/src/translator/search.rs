//! `translate_batch`'s search keywords as the options CTranslate2 searches with, and the
//! keywords tessel refuses.

use pyo3::PyResult;
use tessel_model::{Convention, DecodeOptions, Sampling};

use crate::errors;

/// Widest beam a call may ask for: the width the model is loaded for (sessions are planned for
/// each call's own width, up to this).
pub const MAX_BEAM: usize = 32;

/// The search keywords of `translate_batch`.
pub struct Search {
    pub beam_size: usize,
    pub num_hypotheses: usize,
    pub length_penalty: f32,
    pub patience: f32,
    pub repetition_penalty: f32,
    pub no_repeat_ngram_size: usize,
    pub max_decoding_length: usize,
    pub min_decoding_length: usize,
    pub sampling: Option<Sampling>,
}

impl Search {
    /// The options CTranslate2 would search with: its convention and lengths, nothing of the
    /// generation config (`generation`) but the decoder start and banned words it fixes for
    /// the model.
    pub fn options(&self, generation: &DecodeOptions) -> PyResult<DecodeOptions> {
        let beam = self.beam_size;
        check_beam(beam)?;
        if self.num_hypotheses == 0 || self.num_hypotheses > beam {
            return Err(errors::input(format!(
                "num_hypotheses {}: expected 1 to beam_size ({beam})",
                self.num_hypotheses
            )));
        }
        if !(self.patience.is_finite() && self.patience > 0.0) {
            return Err(errors::input("patience: expected a finite value above 0"));
        }
        let needed = (beam as f32 * self.patience).round() as usize;
        if beam > 1 && self.num_hypotheses > needed {
            return Err(errors::input(format!(
                "num_hypotheses {} is more than beam_size × patience ({needed})",
                self.num_hypotheses
            )));
        }
        if self.sampling.is_some() && beam != 1 {
            return Err(errors::unsupported(
                "sampling with beam_size above 1",
                "one hypothesis is drawn",
            ));
        }
        let mut o = generation.clone();
        o.search.beam = beam;
        o.search.length_penalty = self.length_penalty;
        o.search.patience = self.patience;
        o.search.sampling = self.sampling;
        o.num_hypotheses = self.num_hypotheses;
        o.max_new_tokens = Some(self.max_decoding_length);
        o.max_length = usize::MAX;
        o.max_length_ratio = None;
        o.min_length = self.min_decoding_length + 1;
        o.repetition_penalty = self.repetition_penalty;
        o.no_repeat_ngram_size = self.no_repeat_ngram_size;
        o.suppress_tokens.clear();
        o.forced_bos = None;
        o.forced_eos = None;
        o.prefix.clear();
        o.renormalize_logits = false;
        o.convention = Convention::CTranslate2;
        Ok(o)
    }
}

/// Refuses a beam of 0 or past [`MAX_BEAM`].
pub fn check_beam(beam: usize) -> PyResult<()> {
    if beam == 0 || beam > MAX_BEAM {
        return Err(errors::input(format!(
            "beam_size {beam}: expected 1 to {MAX_BEAM}"
        )));
    }
    Ok(())
}

/// The first of `(keyword, left at its default, why)` given another value, as
/// [`errors::unsupported`].
pub fn refuse_unsupported(keywords: &[(&str, bool, &str)]) -> PyResult<()> {
    match keywords.iter().find(|(_, default, _)| !default) {
        Some((name, _, why)) => Err(errors::unsupported(name, why)),
        None => Ok(()),
    }
}
