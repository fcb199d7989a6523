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
//!
//! The bias of a call depends only on key minus query, so it is written as a relative-position
//! (Toeplitz) table, one entry per head and distance: `heads × (q_len + kv_len - 1)` values,
//! linear in the lengths, where a `[head][query][key]` matrix would be quadratic.

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

    /// Elements [`RelativeBias::fill`] writes for `q_len` queries over `kv_len` keys: one per
    /// head and key-minus-query distance.
    pub fn elements(heads: usize, q_len: usize, kv_len: usize) -> usize {
        match (q_len, kv_len) {
            (0, _) | (_, 0) => 0,
            _ => heads * (q_len + kv_len - 1),
        }
    }

    /// Writes the bias of queries at positions `first..first + q_len` over keys `0..kv_len`
    /// into `out` as the kernel's relative-position table (`[head][key - query + q_len - 1]`),
    /// and returns the kernel's view of it. With one query it is also the `[head][key]`
    /// matrix.
    pub fn fill<'o>(
        &self,
        first: usize,
        q_len: usize,
        kv_len: usize,
        out: &'o mut [f32],
    ) -> Result<Bias<'o>, KernelError> {
        let need = Self::elements(self.heads, q_len, kv_len);
        let got = out.len();
        let out = out.get_mut(..need).ok_or(KernelError::BufferTooSmall {
            what: "relative bias",
            needed: need,
            got,
        })?;
        let per_head = need / self.heads;
        let table = self.table.as_slice();
        // Entry `e` is key `j` of query `i` where `e = j - i + q_len - 1`: the key sits
        // `e - (q_len - 1) - first` positions from the query's position `first + i`.
        let nearest = q_len as i64 - 1 + first as i64;
        for e in 0..per_head {
            let row = self.bucket(e as i64 - nearest) * self.heads;
            for h in 0..self.heads {
                out[h * per_head + e] = table[row + h];
            }
        }
        Ok(Bias::toeplitz(out, per_head))
    }
}
