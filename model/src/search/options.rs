//! What a search is asked to do: beam width, length limit and penalty, EOS, sampling, and
//! `transformers`' early stopping.

use crate::sampling::Sampling;

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchOptions {
    /// Beam width; 1 is greedy.
    pub beam: usize,
    /// Tokens to generate at most (decoder positions, the BOS input included).
    pub max_steps: usize,
    /// Exponent α of the length normalisation `score / length^α` (0: raw sum).
    pub length_penalty: f32,
    /// Finish a hypothesis when it produces EOS; `false` treats EOS as an ordinary token, so
    /// every search runs exactly `max_steps` steps (benchmarks).
    pub stop_at_eos: bool,
    /// Draw each token at random instead of taking the most likely one (`beam` must be 1);
    /// `None` is greedy or beam search.
    pub sampling: Option<Sampling>,
}

impl SearchOptions {
    /// Greedy search of at most `max_steps` tokens, stopping at EOS.
    pub fn greedy(max_steps: usize) -> SearchOptions {
        SearchOptions {
            beam: 1,
            max_steps,
            length_penalty: 1.0,
            stop_at_eos: true,
            sampling: None,
        }
    }

    /// Beam search of width `beam`, at most `max_steps` tokens, length penalty 1.
    pub fn beam(beam: usize, max_steps: usize) -> SearchOptions {
        SearchOptions {
            beam,
            ..SearchOptions::greedy(max_steps)
        }
    }

    /// One hypothesis of at most `max_steps` tokens, each drawn as `sampling` says.
    pub fn sample(sampling: Sampling, max_steps: usize) -> SearchOptions {
        SearchOptions {
            sampling: Some(sampling),
            ..SearchOptions::greedy(max_steps)
        }
    }
}

/// When a beam search under `transformers`' rules stops before its length limit
/// (`early_stopping` of `transformers.generate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EarlyStopping {
    /// `early_stopping=True`: as soon as `beam` hypotheses have finished.
    WhenFull,
    /// `early_stopping=False` (`transformers`' default): once `beam` hypotheses have finished
    /// and the best live one, its score normalised by its current length, is no better than
    /// the worst finished one.
    #[default]
    Heuristic,
    /// `early_stopping="never"`: as `Heuristic`, but with a positive length penalty the live
    /// score is normalised by the length limit (the best it could reach), so the search
    /// nearly always runs to the limit.
    Never,
}
