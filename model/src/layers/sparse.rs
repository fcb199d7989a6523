//! Sparse self-attention for long sources: Longformer's local window with global tokens (LED's
//! encoder).
//!
//! Each query sees the keys within `radius` positions of it (`attention_window / 2` in
//! Longformer's configuration) and, when its source has global tokens, those tokens too. The
//! global tokens are the first `global` positions of a source (a [`Group`]'s `global`): the
//! model cards of LED put global attention on the first token, and question-answering puts it
//! on the question, which comes first. A global token's own output is computed again with the
//! layer's separate global projections, over every position of its source:
//!
//! - local row `i`: `softmax(q_i · [K_0..g | K_{i-r..=i+r}]ᵀ / √d_head) · V` with the layer's
//!   ordinary Q, K and V (a global key inside the window counted once);
//! - global row `i < g`: `softmax(q'_i · K'ᵀ / √d_head) · V'` over every position, with
//!   `q' = x·W_q' + b`, `[K' | V'] = x·W_kv' + b`.
//!
//! Work is `O(n · (r + g))` for the local rows and `O(n · g)` for the global ones; nothing
//! `n × n` is formed. The global projections reuse the fused Q/K/V buffer once the local
//! attention has read it, so the layer needs no buffer beyond a dense one's.

use tessel_kernels::activation::Activation;
use tessel_kernels::attention::{Bias, Mask};
use tessel_kernels::{KernelError, ScratchSpec, View, ViewMut};

use super::{linear, Group, Heads, Linear, Run, TransientGlobal};

/// Longformer's separate projections for the global tokens: the query of the global rows, the
/// fused key and value of every row.
#[derive(Clone, Debug)]
pub struct GlobalProjections<'w> {
    query: Linear<'w>,
    kv: Linear<'w>,
}

/// The local window of a layer's self-attention and, for Longformer, its global projections.
#[derive(Clone, Debug)]
pub struct LocalAttention<'w> {
    radius: usize,
    global: Option<GlobalProjections<'w>>,
    transient: Option<TransientGlobal<'w>>,
}

impl<'w> GlobalProjections<'w> {
    /// From the `d → a` query and the fused `d → 2a` key/value projections.
    pub fn new(query: Linear<'w>, kv: Linear<'w>) -> GlobalProjections<'w> {
        GlobalProjections { query, kv }
    }
}

impl<'w> LocalAttention<'w> {
    /// Queries see the keys within `radius` positions, and the global tokens through `global`.
    pub fn new(radius: usize, global: Option<GlobalProjections<'w>>) -> LocalAttention<'w> {
        LocalAttention {
            radius,
            global,
            transient: None,
        }
    }

    /// The same window with LongT5's transient-global side keys ([`TransientGlobal`]).
    pub fn with_transient(mut self, transient: TransientGlobal<'w>) -> LocalAttention<'w> {
        self.transient = Some(transient);
        self
    }

    /// LongT5's transient-global side keys, when the layer has them.
    pub fn transient(&self) -> Option<&TransientGlobal<'w>> {
        self.transient.as_ref()
    }

    /// Keys on each side a query sees.
    pub fn radius(&self) -> usize {
        self.radius
    }

    /// Whether the layer has global projections.
    pub fn has_global(&self) -> bool {
        self.global.is_some()
    }

    /// The global query and fused key/value projections, when the layer has them.
    pub fn global(&self) -> Option<(&Linear<'w>, &Linear<'w>)> {
        self.global.as_ref().map(|g| (&g.query, &g.kv))
    }

    /// Its linear layers.
    #[cfg(feature = "std")]
    pub(crate) fn linears_mut(&mut self) -> impl Iterator<Item = &mut Linear<'w>> {
        self.global
            .iter_mut()
            .flat_map(|g| [&mut g.query, &mut g.kv])
    }

    /// Checks the global projections against the layer's widths.
    pub(crate) fn check(&self, (d, a): (usize, usize)) -> Result<(), KernelError> {
        if let Some(g) = &self.global {
            super::attention::check_projection("global query", &g.query, (d, a), 1)?;
            super::attention::check_projection("global kv", &g.kv, (d, a), 2)?;
        }
        if let Some(t) = &self.transient {
            if t.norm().width() != d {
                return Err(KernelError::InvalidArgument(
                    "transient-global norm width must be d_model",
                ));
            }
            if self.global.is_some() {
                return Err(KernelError::InvalidArgument(
                    "transient-global side keys exclude Longformer's global projections",
                ));
            }
        }
        Ok(())
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        self.global
            .as_ref()
            .map_or(0, |g| g.query.bytes() + g.kv.bytes())
            + self.transient.as_ref().map_or(0, TransientGlobal::bytes)
    }

    /// Scratch of the global projections over up to `rows` rows of width `d`.
    pub fn scratch(d: usize, a: usize, rows: usize, threads: usize) -> ScratchSpec {
        linear::scratch(rows, d, 2 * a, threads).or(linear::scratch(rows, d, a, threads))
    }

    /// The mask of `group`'s local rows: the window, the group's global tokens first.
    pub fn mask<'b>(&self, group: &Group, bias: Option<Bias<'b>>) -> Mask<'b> {
        let global_keys = if self.global.is_some() {
            group.global
        } else {
            0
        };
        Mask {
            radius: Some(self.radius),
            global_keys,
            bias,
            ..Mask::NONE
        }
    }

    /// Overwrites the attention output of every group's global rows (`attn`, `a` wide) with
    /// their global attention over the group's positions, projecting `input` into `qkv`
    /// (`3a` wide; the local attention has read it). Nothing runs when no group has global
    /// tokens or the layer has no global projections.
    pub fn attend_global(
        &self,
        run: Run<'_>,
        (heads, input): (&Heads, View<'_>),
        groups: &[Group],
        (qkv, mut attn): (&mut [f32], ViewMut<'_>),
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let Some(global) = &self.global else {
            return Ok(());
        };
        if groups.iter().all(|g| g.global == 0) {
            return Ok(());
        }
        let (rows, a) = (input.rows(), heads.width());
        let identity = Activation::Identity;
        let kv = ViewMut::new(qkv.get_mut(a..).unwrap_or_default(), rows, 2 * a, 3 * a)?;
        global.kv.forward(run, input, kv, identity, None, scratch)?;
        let mut row0 = 0;
        for group in groups {
            let g = group.global.min(group.rows);
            if g > 0 {
                let q = ViewMut::new(&mut qkv[row0 * 3 * a..], g, a, 3 * a)?;
                let x = input.slice_rows(row0, g)?;
                global.query.forward(run, x, q, identity, None, scratch)?;
                let all = View::new(&qkv[row0 * 3 * a..], group.rows, 3 * a, 3 * a)?;
                let q = all.slice_rows(0, g)?.slice_cols(0, a)?;
                let (k, v) = (all.slice_cols(a, a)?, all.slice_cols(2 * a, a)?);
                let out = attn.reborrow().slice_rows(row0, g)?;
                heads.attend(run, (q, k, v), &Mask::NONE, out, scratch)?;
            }
            row0 += group.rows;
        }
        Ok(())
    }
}
