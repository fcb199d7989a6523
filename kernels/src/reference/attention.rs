//! Reference multi-head attention: plain loops, `f64` scores and sums, the same mask semantics
//! as [`crate::attention::attention`] written out directly. Nothing large is materialised: each
//! query takes two passes over its keys (max, then weights and weighted values) with a
//! `d_head`-long `f64` accumulator supplied by the caller.

use crate::attention::{check, AttentionShape, BiasLayout, Mask};
use crate::error::KernelError;
use crate::view::{View, ViewMut};

/// Whether query `i` sees key `j` (ignoring the bias), as documented on [`Mask`].
pub fn sees(mask: &Mask<'_>, kv_len: usize, i: usize, j: usize) -> bool {
    if j >= mask.key_len.unwrap_or(kv_len) {
        return false;
    }
    if j < mask.global_keys {
        return true;
    }
    if let Some(past) = mask.causal_offset {
        let position = past as u128 + i as u128;
        if j as u128 > position {
            return false;
        }
        if let Some(w) = mask.window {
            if j as u128 + w as u128 <= position {
                return false;
            }
        }
    }
    if let Some(r) = mask.radius {
        let position = mask.local_origin as u128 + i as u128;
        if position.abs_diff(j as u128) > r as u128 {
            return false;
        }
    }
    true
}

/// `out = softmax(scale · Q Kᵀ + bias, masked) V` per head, exactly (then rounded to `f32`).
///
/// Same arguments and validation as the fast kernel, except the scratch: `acc` holds at least
/// `d_head` `f64`. Queries that see no key (or only `-inf` biases) get zeros.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    shape: &AttentionShape,
    q: View<'_>,
    k: View<'_>,
    v: View<'_>,
    out: ViewMut<'_>,
    mask: &Mask<'_>,
    scale: Option<f32>,
    acc: &mut [f64],
) -> Result<(), KernelError> {
    let checked = check(shape, &q, &k, &v, &out, mask, scale)?;
    let d = shape.d_head;
    if acc.len() < d {
        return Err(KernelError::BufferTooSmall {
            what: "acc",
            needed: d,
            got: acc.len(),
        });
    }
    let acc = &mut acc[..d];
    if checked.width == 0 {
        // Empty rows: nothing to read or write (the views may be empty slices).
        return Ok(());
    }
    let scale = checked.scale as f64;
    let score = |h: usize, i: usize, j: usize| -> f64 {
        let q_row = &q.data[i * q.stride + h * d..][..d];
        let k_row = &k.data[j * k.stride + h * d..][..d];
        let dot: f64 = q_row
            .iter()
            .zip(k_row)
            .map(|(&a, &b)| a as f64 * b as f64)
            .sum();
        let g = mask.global_keys;
        let bias = match (&mask.side_bias, &mask.bias) {
            (Some(side), _) if j < g => {
                let block = (i / side.block_size).min(g - 1);
                side.data[h * side.head_stride + j + g - 1 - block] as f64
            }
            (_, Some(b)) => {
                // With a side bias, `bias` covers the keys from `g` on only.
                let j = if mask.side_bias.is_some() { j - g } else { j };
                let entry = match b.layout {
                    BiasLayout::Dense => i * b.row_stride + j,
                    BiasLayout::Toeplitz => j + shape.q_len - 1 - i,
                };
                b.data[h * b.head_stride + entry] as f64
            }
            _ => 0.0,
        };
        scale * dot + bias
    };
    for h in 0..shape.heads {
        for i in 0..shape.q_len {
            let visible = |j: &usize| sees(mask, shape.kv_len, i, *j);
            let max = (0..shape.kv_len)
                .filter(visible)
                .map(|j| score(h, i, j))
                .fold(f64::NEG_INFINITY, f64::max);
            acc.fill(0.0);
            let mut total = 0.0;
            if max > f64::NEG_INFINITY {
                for j in (0..shape.kv_len).filter(visible) {
                    let weight = libm::exp(score(h, i, j) - max);
                    total += weight;
                    let v_row = &v.data[j * v.stride + h * d..][..d];
                    for (a, &x) in acc.iter_mut().zip(v_row) {
                        *a += weight * x as f64;
                    }
                }
            }
            let out_row = &mut out.data[i * out.stride + h * d..][..d];
            for (y, a) in out_row.iter_mut().zip(acc.iter()) {
                *y = if total > 0.0 { (a / total) as f32 } else { 0.0 };
            }
        }
    }
    Ok(())
}
