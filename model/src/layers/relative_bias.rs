//! T5's relative position bias: a learned value per head for each bucket of key-minus-query
//! distance, added to the attention scores of every layer of a stack (computed once per pass,
//! shared by the layers).
//!
//! Buckets (Hugging Face `T5Attention._relative_position_bucket`): with `n` buckets, the
//! encoder (bidirectional) gives keys after the query the upper `n/2` buckets and measures
//! `|distance|`; the decoder (causal) measures how far the key is behind the query. Distances
//! below `n/4` (bidirectional; `n/2` causal) have a bucket each; larger ones share
//! logarithmically wider buckets up to `max_distance`, beyond which all fall in the last one.
//! The logarithm is taken in `f32`, as PyTorch does, so bucket edges agree.

use tessel_kernels::attention::Bias;
use tessel_kernels::KernelError;

use crate::storage::Weights;

/// The bias table `[bucket][head]` and its bucketing.
#[derive(Clone, Debug)]
pub struct RelativeBias<'w> {
    table: Weights<'w, f32>,
    heads: usize,
    buckets: usize,
    max_distance: usize,
    bidirectional: bool,
}

impl<'w> RelativeBias<'w> {
    /// From Hugging Face's `relative_attention_bias.weight` (`[buckets × heads]`).
    pub fn new(
        table: impl Into<Weights<'w, f32>>,
        heads: usize,
        buckets: usize,
        max_distance: usize,
        bidirectional: bool,
    ) -> Result<RelativeBias<'w>, KernelError> {
        let table = table.into();
        if buckets == 0 || heads == 0 || table.len() != buckets * heads {
            return Err(KernelError::InvalidArgument(
                "relative bias table must be buckets × heads",
            ));
        }
        Ok(RelativeBias {
            table,
            heads,
            buckets,
            max_distance,
            bidirectional,
        })
    }

    /// The table, `[bucket][head]`.
    pub fn table(&self) -> &[f32] {
        self.table.as_slice()
    }

    /// Heads, buckets, the distance from which every key falls in the last bucket, and
    /// whether keys after the query have buckets of their own (the encoder).
    pub fn shape(&self) -> (usize, usize, usize, bool) {
        (
            self.heads,
            self.buckets,
            self.max_distance,
            self.bidirectional,
        )
    }

    /// Bytes of the table.
    pub fn bytes(&self) -> usize {
        self.table.bytes()
    }

    /// The bucket of a key `relative = key - query` positions away.
    pub fn bucket(&self, relative: i64) -> usize {
        let mut buckets = self.buckets as i64;
        let mut bucket = 0;
        let distance = if self.bidirectional {
            buckets /= 2;
            if relative > 0 {
                bucket += buckets;
            }
            relative.abs()
        } else {
            (-relative).max(0)
        };
        let max_exact = buckets / 2;
        if distance < max_exact {
            return (bucket + distance) as usize;
        }
        let ratio = libm::logf(distance as f32 / max_exact as f32);
        let range = libm::log(self.max_distance as f64 / max_exact as f64) as f32;
        let large = max_exact + (ratio / range * (buckets - max_exact) as f32) as i64;
        (bucket + large.min(buckets - 1)) as usize
    }

    /// Elements [`RelativeBias::fill`] writes for `q_len` queries over `kv_len` keys.
    pub fn elements(heads: usize, q_len: usize, kv_len: usize) -> usize {
        heads * q_len * kv_len
    }

    /// Writes the bias of queries at positions `first..first + q_len` over keys `0..kv_len`
    /// into `out`, `[head][query][key]`, and returns the kernel's view of it.
    pub fn fill<'o>(
        &self,
        first: usize,
        q_len: usize,
        kv_len: usize,
        out: &'o mut [f32],
    ) -> Result<Bias<'o>, KernelError> {
        let need = Self::elements(self.heads, q_len, kv_len);
        let out = out.get_mut(..need).ok_or(KernelError::BufferTooSmall {
            what: "relative bias",
            needed: need,
            got: 0,
        })?;
        let table = self.table.as_slice();
        for i in 0..q_len {
            let query = (first + i) as i64;
            for j in 0..kv_len {
                let row = self.bucket(j as i64 - query) * self.heads;
                for h in 0..self.heads {
                    out[(h * q_len + i) * kv_len + j] = table[row + h];
                }
            }
        }
        Ok(Bias::dense(out, kv_len, q_len * kv_len))
    }
}
