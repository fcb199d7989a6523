//! CTranslate2's int8 linear weights, loaded as int8 without dequantising.
//!
//! `ct2-transformers-converter --quantization int8` (and `int8_float32`, `int8_float16`,
//! `int8_bfloat16`, which differ only in how the other variables are stored) quantises every
//! variable whose layer spec has a `weight_scale`: the linear layers, the embedding tables and
//! Whisper's convolutions (`LinearSpec`, `EmbeddingsSpec`, `Conv1DSpec`), each row `r` to
//! `q = rint(w · s_r)` with `s_r = 127 / max |w_r|`. Norms, biases and position tables keep a
//! float type.
//!
//! tessel keeps the linear layers (and a tied output projection, which reads the embedding
//! table's int8 rows) as they are: [`Linear::from_ct2_int8`] packs `q` and `1 / s` into
//! [`WeightType::Int8`] storage, the layout CTranslate2 uses, so the weights are bit for bit the
//! file's (Marian's projection then has its zero start row appended as int8 zeros, scale 1). Embedding tables are dequantised to `f32` (`q / s`; tessel's embeddings are float),
//! and so are Whisper's convolutions (the stem stays float, see [`WeightType::for_conv_stem`]).
//! When [`Ct2Options::weights`](super::Ct2Options) asks for a float type, int8 linear weights
//! are dequantised and stored as asked.

use super::binary::Dtype;
use super::transformer::Builder;
use super::Ct2Error;
use crate::layers::{Linear, WeightType};
use crate::load::{linear_error, LoadError};

impl Builder<'_, '_, '_> {
    /// The `[out × inp]` variable `name` and its `weight_scale` as an int8 layer with `bias`,
    /// when the file stores it as `int8` and the options keep that (no storage asked, or
    /// int8); `None` otherwise (the caller loads it as a float tensor).
    pub(super) fn stored_int8(
        &mut self,
        name: &str,
        out: usize,
        inp: usize,
        bias: Option<&[f32]>,
    ) -> Result<Option<Linear<'static>>, Ct2Error> {
        self.stored_int8_padded(name, out, inp, 0, bias)
    }

    /// As [`Builder::stored_int8`], the layer followed by `zero_rows` output channels of int8
    /// zeros with scale 1 (CTranslate2's scale for an all-zero row), which dequantise to
    /// exactly zero: each of them computes exactly its bias. `bias` has `out + zero_rows`
    /// values. The stored rows and scales are kept as they are.
    pub(super) fn stored_int8_padded(
        &mut self,
        name: &str,
        out: usize,
        inp: usize,
        zero_rows: usize,
        bias: Option<&[f32]>,
    ) -> Result<Option<Linear<'static>>, Ct2Error> {
        let keep = matches!(self.weights, None | Some(WeightType::Int8));
        let Some(variable) = self.vars.file.variables.get(name) else {
            return Ok(None);
        };
        if !keep || variable.dtype != Dtype::I8 {
            return Ok(None);
        }
        self.vars.get(name);
        if variable.shape != [out, inp] {
            return Err(Ct2Error::Shape {
                name: name.to_owned(),
                expected: vec![out, inp],
                got: variable.shape.clone(),
            });
        }
        let scale_name = match name.strip_suffix("weight") {
            Some(prefix) => format!("{prefix}weight_scale"),
            None => {
                return Err(Ct2Error::UnsupportedDtype {
                    name: name.to_owned(),
                    dtype: Dtype::I8,
                })
            }
        };
        let scale = self
            .vars
            .get(&scale_name)
            .ok_or_else(|| Ct2Error::Missing(scale_name.clone()))?;
        if scale.len() != out || matches!(scale.dtype, Dtype::I8 | Dtype::I16 | Dtype::I32) {
            return Err(Ct2Error::Shape {
                name: scale_name,
                expected: vec![out],
                got: scale.shape.clone(),
            });
        }
        let weight: &[i8] = bytemuck::cast_slice(variable.data);
        let mut scales = scale.to_f32();
        let layer = if zero_rows == 0 {
            Linear::from_ct2_int8(out, inp, weight, &scales, bias)
        } else {
            let rows = out + zero_rows;
            let mut padded = Vec::new();
            padded
                .try_reserve_exact(rows * inp)
                .map_err(|_| LoadError::OutOfMemory {
                    what: name.to_owned(),
                    bytes: rows * inp,
                })?;
            padded.extend_from_slice(weight);
            padded.resize(rows * inp, 0);
            scales.resize(rows, 1.0);
            Linear::from_ct2_int8(rows, inp, &padded, &scales, bias)
        }
        .map_err(linear_error(name))?;
        Ok(Some(layer))
    }
}
