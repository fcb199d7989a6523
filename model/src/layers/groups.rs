//! Which rows of a decoder pass belong to which sequence.
//!
//! A session decodes up to `max_batch` sequences together, each in its own slot of the caches
//! (its beams' self-attention rows, its encoder memory). A decoder pass runs one product per
//! weight over the rows of every sequence in it, packed group after group; attention, which
//! reads per-sequence state, runs per group. A plain session's pass is one group in slot 0.

use tessel_kernels::attention::Bias;
use tessel_kernels::KernelError;

/// One sequence's rows in a decoder pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Group {
    /// The sequence's slot: its cache rows and encoder memory.
    pub slot: usize,
    /// Its rows in the pass: one per beam in a step, the tokens of a forced prefix.
    pub rows: usize,
    /// The position of its first row.
    pub position: usize,
    /// Its encoded source length.
    pub src_len: usize,
    /// In an encoder pass, its leading positions with global attention (Longformer); 0
    /// elsewhere.
    pub global: usize,
}

impl Group {
    /// A source of `rows` positions in slot `slot`, as an encoder pass holds it.
    pub fn source(slot: usize, rows: usize) -> Group {
        Group {
            slot,
            rows,
            position: 0,
            src_len: rows,
            global: 0,
        }
    }

    /// The same source with global attention on its first `global` positions (at most all).
    pub fn with_global(self, global: usize) -> Group {
        Group {
            global: global.min(self.rows),
            ..self
        }
    }
}

/// Each group's relative position bias for a step (one query per beam, all at the group's
/// position, over keys `0..=position`), `[head][key]`, the groups `stride` elements apart.
#[derive(Clone, Copy, Debug)]
pub struct StepBias<'a> {
    /// The groups' biases.
    pub data: &'a [f32],
    /// Elements from one group's bias to the next.
    pub stride: usize,
    /// Attention heads.
    pub heads: usize,
}

impl<'a> StepBias<'a> {
    /// Group `index`'s bias over `kv_len` keys.
    pub fn group(&self, index: usize, kv_len: usize) -> Result<Bias<'a>, KernelError> {
        let len = self.heads * kv_len;
        let data = self
            .data
            .get(index * self.stride..)
            .and_then(|rest| rest.get(..len))
            .filter(|_| len <= self.stride)
            .ok_or(KernelError::InvalidArgument("step bias outside its region"))?;
        Ok(Bias::dense(data, kv_len, kv_len))
    }
}
