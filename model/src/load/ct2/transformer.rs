//! Builds tessel's layers from the variables of CTranslate2's Transformer layer specs
//! (`TransformerEncoderLayerSpec`, `TransformerDecoderLayerSpec` and their parts), finding the
//! optional parts from the variables present, as CTranslate2's own C++ layers do.
//!
//! | CTranslate2 variable | tessel layer |
//! |---|---|
//! | `*/layer_{i}/self_attention/linear_0` (fused Q,K,V), `linear_1`, `layer_norm` | [`SelfAttention`] and its norm |
//! | `decoder/layer_{i}/attention/linear_0` (Q), `linear_1` (fused K,V), `linear_2`, `layer_norm` | [`CrossAttention`] and its norm |
//! | `*/{self_attention,attention}/queries_scale` | the score scale (checked equal to the model's) |
//! | `*/layer_{i}/ffn/linear_0` (activated), `linear_0_noact` (gated FFN, optional), `linear_1`, `layer_norm` | [`FeedForward`] and its norm |
//! | `*/layer_0/self_attention/relative_attention_bias` `[buckets, heads]`, `relative_attention_max_distance` | the stack's [`RelativeBias`] (T5; later layers alias it) |
//! | `{scope}/gamma` with `{scope}/beta` / without | LayerNorm / RMSNorm |
//! | `{encoder,decoder}/position_encodings/encodings` (or CTranslate2's sinusoid) | position tables |
//!
//! Linear weights keep the type `model.bin` stores them in (`float32`, `float16`, `bfloat16`,
//! `int8` with its per-row `weight_scale`, see [`super::int8`]) unless
//! [`super::Ct2Options::weights`] asks for another; `int16` weights are dequantised with their
//! scale to `f32`. Embeddings (int8 ones dequantised; Whisper's `float16` one stays `float16`),
//! positions, norms, biases and the relative bias table are `f32` in memory (exact for every
//! stored float type).
//!
//! Norm epsilon: `config.json`'s `layer_norm_epsilon`, else CTranslate2's defaults, 1e-5 for a
//! LayerNorm and 1e-6 for an RMSNorm.

use std::collections::BTreeSet;

use super::vars::Vars;
use super::Ct2Error;
use crate::aligned::AlignedBuf;
use crate::config::{Config, FfnActivation, NormPlacement, StackKind};
use crate::layers::{
    Block, CrossAttention, FeedForward, Heads, Linear, Norm, RelativeBias, SelfAttention,
    WeightType,
};
use crate::load::{block, linear_rows, out_of_memory, LoadError};

/// CTranslate2's LayerNorm epsilon when `config.json` sets none.
pub(super) const LAYER_NORM_EPS: f32 = 1e-5;
/// CTranslate2's RMSNorm epsilon when `config.json` sets none.
pub(super) const RMS_NORM_EPS: f32 = 1e-6;

/// CTranslate2's sinusoidal position table: `[sin(p·ω_i) | cos(p·ω_i)]`,
/// `ω_i = exp(-i·ln(10000)/(d/2 - 1))`, position `p` (from 0) encoded as `p + 1`.
pub fn sinusoidal(rows: usize, d: usize) -> Vec<f32> {
    let half = d / 2;
    let increment = 10000f64.ln() / (half.saturating_sub(1).max(1)) as f64;
    let mut table = vec![0.0f32; rows * d];
    for (p, row) in table.chunks_exact_mut(d.max(1)).enumerate() {
        for i in 0..half {
            let angle = (p + 1) as f64 * (-(i as f64) * increment).exp();
            row[i] = angle.sin() as f32;
            row[half + i] = angle.cos() as f32;
        }
    }
    table
}

/// Builds layers from the file's variables.
pub(super) struct Builder<'v, 'f, 'a> {
    pub(super) vars: &'v mut Vars<'f, 'a>,
    pub(super) d: usize,
    pub(super) heads: Heads,
    /// `config.json`'s `layer_norm_epsilon`, if set.
    pub(super) eps: Option<f32>,
    pub(super) weights: Option<WeightType>,
}

/// One thread's layers, in order, and the variables it read.
type Chunk<T> = (Vec<Result<T, Ct2Error>>, BTreeSet<String>);

/// Threads that pack layers at once: the cores there are, at most one per layer.
fn pack_threads(layers: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(layers).max(1)
}

impl<'v, 'f, 'a> Builder<'v, 'f, 'a> {
    /// Builds the layers of `config` from `vars`, norms with `config.json`'s epsilon `eps`
    /// when it sets one, linear weights stored as `weights` asks.
    pub(super) fn new(
        vars: &'v mut Vars<'f, 'a>,
        config: &Config,
        eps: Option<f32>,
        weights: Option<WeightType>,
    ) -> Builder<'v, 'f, 'a> {
        Builder {
            vars,
            d: config.d_model,
            // CTranslate2's converters write the encoder's head count for both stacks (and
            // `Spec::read` refuses differing ones), so the encoder's serve every layer.
            heads: Heads::of(config, StackKind::Encoder),
            eps,
            weights,
        }
    }

    /// `build(builder, i)` for every `i` in `0..count`, split over the machine's cores, each
    /// thread reading the file through its own [`Builder`] (the variables they read are
    /// recorded as used here). The results come back in order; an error is the one of the
    /// lowest `i` that failed, as building them one by one would report.
    pub(super) fn each_layer<T: Send>(
        &mut self,
        count: usize,
        build: impl Fn(&mut Builder<'_, 'f, 'a>, usize) -> Result<T, Ct2Error> + Sync,
    ) -> Result<Vec<T>, Ct2Error> {
        let threads = pack_threads(count);
        let (file, d, heads, eps, weights) =
            (self.vars.file, self.d, self.heads, self.eps, self.weights);
        let chunks: Vec<Chunk<T>> = std::thread::scope(|s| {
            let build = &build;
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut vars = Vars::new(file);
                        let mut b = Builder {
                            vars: &mut vars,
                            d,
                            heads,
                            eps,
                            weights,
                        };
                        let range = t * count / threads..(t + 1) * count / threads;
                        let built = range.map(|i| build(&mut b, i)).collect();
                        (built, vars.used)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut out = Vec::with_capacity(count);
        for (built, used) in chunks {
            self.vars.used.extend(used);
            for layer in built {
                out.push(layer?);
            }
        }
        Ok(out)
    }

    /// An `f32` table of `shape` in aligned memory.
    pub(super) fn table(&mut self, name: &str, shape: &[usize]) -> Result<AlignedBuf, Ct2Error> {
        self.vars.table(name, shape, 0)
    }

    /// The `out × inp` linear `{from}/weight` with its bias when the file has one.
    pub(super) fn linear(
        &mut self,
        from: &str,
        out: usize,
        inp: usize,
    ) -> Result<Linear<'static>, Ct2Error> {
        let name = format!("{from}/weight");
        let bias_name = format!("{from}/bias");
        let bias = if self.vars.has(&bias_name) {
            Some(self.vars.tensor(&bias_name, &[out])?)
        } else {
            None
        };
        self.weight(&name, out, inp, bias.as_deref())
    }

    /// The `out × inp` weight `name` with `bias`: kept int8 where [`Builder::stored_int8`]
    /// keeps it, else packed from the stored float type (or as the options ask).
    pub(super) fn weight(
        &mut self,
        name: &str,
        out: usize,
        inp: usize,
        bias: Option<&[f32]>,
    ) -> Result<Linear<'static>, Ct2Error> {
        if let Some(layer) = self.stored_int8(name, out, inp, bias)? {
            return Ok(layer);
        }
        let weight = self.vars.stored(name, &[out, inp])?;
        let storage = self.weights.unwrap_or(weight.weight_type());
        Ok(linear_rows(name, &weight, 0..out, inp, bias, storage)?)
    }

    /// The norm `{from}`: a LayerNorm when `{from}/beta` exists, else an RMSNorm.
    pub(super) fn norm(&mut self, from: &str) -> Result<Norm<'static>, Ct2Error> {
        self.norm_scaled(from, 1.0)
    }

    /// The norm `{from}` with its output multiplied by `scale` (folded into `γ` and `β`).
    pub(super) fn norm_scaled(
        &mut self,
        from: &str,
        scale: f32,
    ) -> Result<Norm<'static>, Ct2Error> {
        let d = self.d;
        let beta_name = format!("{from}/beta");
        let scaled = |b: &mut Self, name: &str| -> Result<AlignedBuf, Ct2Error> {
            let values: Vec<f32> = b
                .vars
                .tensor(name, &[d])?
                .iter()
                .map(|v| v * scale)
                .collect();
            if values.iter().any(|v| !v.is_finite()) {
                return Err(LoadError::NonFinite {
                    name: name.to_owned(),
                }
                .into());
            }
            Ok(AlignedBuf::from_slice(&values).map_err(out_of_memory(name))?)
        };
        let gamma = scaled(self, &format!("{from}/gamma"))?;
        if self.vars.has(&beta_name) {
            let beta = scaled(self, &beta_name)?;
            Ok(Norm::layer(gamma, beta, self.eps.unwrap_or(LAYER_NORM_EPS)))
        } else {
            Ok(Norm::rms(gamma, self.eps.unwrap_or(RMS_NORM_EPS)))
        }
    }

    /// Checks `{scope}/queries_scale` (absent: `1/√d_head`) against the model's score scale.
    fn queries_scale(&mut self, scope: &str) -> Result<(), Ct2Error> {
        let name = format!("{scope}/queries_scale");
        let default = tessel_kernels::attention::default_scale(self.heads.d_head);
        let scale = self
            .vars
            .attribute(scope, "queries_scale")?
            .unwrap_or(default);
        if scale != self.heads.scale {
            return Err(Ct2Error::UnsupportedFeature {
                feature: format!(
                    "attention score scales differing between layers ({scale} vs {})",
                    self.heads.scale
                ),
                variable: name,
            });
        }
        Ok(())
    }

    pub(super) fn malformed(scope: &str, e: tessel_kernels::KernelError) -> Ct2Error {
        LoadError::Malformed(format!("{scope}: {e}")).into()
    }

    pub(super) fn self_attention(
        &mut self,
        layer: &str,
    ) -> Result<(Norm<'static>, SelfAttention<'static>), Ct2Error> {
        let (d, a, scope) = (
            self.d,
            self.heads.width(),
            format!("{layer}/self_attention"),
        );
        let qkv = self.linear(&format!("{scope}/linear_0"), 3 * a, d)?;
        let out = self.linear(&format!("{scope}/linear_1"), d, a)?;
        let norm = self.norm(&format!("{scope}/layer_norm"))?;
        self.queries_scale(&scope)?;
        let attention =
            SelfAttention::new(qkv, out, self.heads).map_err(|e| Self::malformed(&scope, e))?;
        Ok((norm, attention))
    }

    /// CTranslate2 keeps the query projection (`linear_0`) apart from the fused K/V one
    /// (`linear_1`), as tessel's cross-attention does.
    pub(super) fn cross_attention(
        &mut self,
        layer: &str,
    ) -> Result<(Norm<'static>, CrossAttention<'static>), Ct2Error> {
        let (d, a, scope) = (self.d, self.heads.width(), format!("{layer}/attention"));
        let q = self.linear(&format!("{scope}/linear_0"), a, d)?;
        let kv = self.linear(&format!("{scope}/linear_1"), 2 * a, d)?;
        let out = self.linear(&format!("{scope}/linear_2"), d, a)?;
        let norm = self.norm(&format!("{scope}/layer_norm"))?;
        self.queries_scale(&scope)?;
        let attention =
            CrossAttention::new(q, kv, out, self.heads).map_err(|e| Self::malformed(&scope, e))?;
        Ok((norm, attention))
    }

    /// The block `layer`: self-attention, cross-attention when `cross`, feed-forward, each
    /// with its norm, placed as `placement`.
    pub(super) fn block(
        &mut self,
        layer: &str,
        cross: bool,
        (d_ff, activation): (usize, FfnActivation),
        placement: NormPlacement,
    ) -> Result<Block<'static>, Ct2Error> {
        let attention = self.self_attention(layer)?;
        let cross = if cross {
            Some(self.cross_attention(layer)?)
        } else {
            None
        };
        let ffn = self.feed_forward(layer, d_ff, activation)?;
        Ok(block(layer, placement, attention, cross, ffn)?)
    }

    /// `linear_1(act(linear_0(x)))`, or gated `linear_1(act(linear_0(x)) ⊙ linear_0_noact(x))`
    /// when the layer has `linear_0_noact`.
    pub(super) fn feed_forward(
        &mut self,
        layer: &str,
        d_ff: usize,
        activation: FfnActivation,
    ) -> Result<(Norm<'static>, FeedForward<'static>), Ct2Error> {
        let (d, scope) = (self.d, format!("{layer}/ffn"));
        let first = self.linear(&format!("{scope}/linear_0"), d_ff, d)?;
        let ungated = format!("{scope}/linear_0_noact");
        let up = if self.vars.has(&format!("{ungated}/weight")) {
            Some(self.linear(&ungated, d_ff, d)?)
        } else {
            None
        };
        let down = self.linear(&format!("{scope}/linear_1"), d, d_ff)?;
        let norm = self.norm(&format!("{scope}/layer_norm"))?;
        let ffn = match up {
            Some(up) => FeedForward::gated(first, up, down, activation.kernel()),
            None => FeedForward::new(first, down, activation.kernel()),
        }
        .map_err(|e| Self::malformed(&scope, e))?;
        Ok((norm, ffn))
    }

    /// The relative position bias of `stack` (`layers` layers), from layer 0's
    /// `self_attention/relative_attention_bias`; every later layer must alias that table and
    /// have the same maximum distance (CTranslate2 computes the bias once per stack from the
    /// first layer). `None` when layer 0 has no such table.
    pub(super) fn relative_bias(
        &mut self,
        stack: &str,
        layers: usize,
        bidirectional: bool,
    ) -> Result<Option<RelativeBias<'static>>, Ct2Error> {
        let scope = |i: usize| format!("{stack}/layer_{i}/self_attention");
        let name = |i: usize| format!("{}/relative_attention_bias", scope(i));
        let first = name(0);
        if !self.vars.has(&first) {
            return Ok(None);
        }
        let heads = self.heads.heads;
        let buckets = self.vars.rows(&first).unwrap_or(0);
        let table = self.table(&first, &[buckets, heads])?;
        let distance = |b: &mut Self, i: usize| -> Result<f32, Ct2Error> {
            b.vars
                .attribute(&scope(i), "relative_attention_max_distance")?
                .ok_or_else(|| {
                    Ct2Error::Missing(format!("{}/relative_attention_max_distance", scope(i)))
                })
        };
        let max_distance = distance(self, 0)?;
        for i in 1..layers {
            let shared = self.vars.canonical(&name(i)) == self.vars.canonical(&first);
            if !shared || distance(self, i)? != max_distance {
                return Err(Ct2Error::UnsupportedFeature {
                    feature: "a relative attention bias per layer (tessel shares layer 0's)"
                        .to_owned(),
                    variable: name(i),
                });
            }
            self.vars.get(&name(i));
        }
        if !(1.0..=crate::config::MAX_POSITIONS as f32).contains(&max_distance) {
            return Err(Ct2Error::Attribute {
                name: format!("{}/relative_attention_max_distance", scope(0)),
                reason: format!(
                    "{max_distance} is not in 1..={}",
                    crate::config::MAX_POSITIONS
                ),
            });
        }
        RelativeBias::new(table, heads, buckets, max_distance as usize, bidirectional)
            .map(Some)
            .map_err(|e| Self::malformed(&first, e))
    }

    /// The first `rows` rows of `{scope}`'s stored position table, or CTranslate2's sinusoid.
    pub(super) fn positions(&mut self, scope: &str, rows: usize) -> Result<AlignedBuf, Ct2Error> {
        let d = self.d;
        let name = format!("{scope}/position_encodings/encodings");
        let table = if self.vars.has(&name) {
            let stored = self.vars.shape(&name)?.to_vec();
            let all = self.vars.tensor(&name, &stored)?;
            if stored.len() != 2 || stored[1] != d || stored[0] < rows {
                return Err(Ct2Error::Shape {
                    name,
                    expected: vec![rows, d],
                    got: stored,
                });
            }
            all[..rows * d].to_vec()
        } else {
            sinusoidal(rows, d)
        };
        if table.iter().any(|v| !v.is_finite()) {
            return Err(LoadError::NonFinite { name }.into());
        }
        Ok(AlignedBuf::from_slice(&table).map_err(out_of_memory(&name))?)
    }
}
