//! The GEMM test problem shared by the f32 (`gemm.rs`) and 16-bit (`gemm_half.rs`) tests:
//! deterministic values, awkward shapes and strides, every epilogue, packing from either
//! layout, the f64 reference and its error bound.
use proptest::prelude::*;
use tessel_kernels::activation::Activation;
use tessel_kernels::gemm::{
    gemm, gemm_scratch, packed_len_of, Element, Epilogue, PackedB, Parallel, Sequential,
};
use tessel_kernels::{reference, Isa};
use tessel_kernels::{View, ViewMut};
use tessel_tests::{assert_close, awkward_dim, dot_tolerance, CanaryMatrix};

/// A deterministic value stream (xorshift) for test matrices.
pub struct Values(pub u64);

impl Values {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A small integer in [-4, 4].
    pub fn small_int(&mut self) -> f32 {
        (self.next_u64() % 9) as f32 - 4.0
    }

    pub fn vec(&mut self, len: usize, mut f: impl FnMut(&mut Values) -> f32) -> Vec<f32> {
        (0..len).map(|_| f(self)).collect()
    }
}

/// How the weight is given to the packer.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// Row-major `k × n`.
    Kn,
    /// PyTorch `nn.Linear`: row-major `n × k`.
    Nk,
}

/// One product to check, with its inputs.
#[derive(Clone, Debug)]
pub struct Problem {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a: Vec<f32>,
    pub lda: usize,
    /// Row-major `k × n` with stride `n` (the reference's view of B).
    pub b: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub activation: Activation,
    pub residual: Option<(Vec<f32>, usize)>,
    pub ldc: usize,
}

impl Problem {
    pub fn a(&self) -> View<'_> {
        View::new(&self.a, self.m, self.k, self.lda).unwrap()
    }

    pub fn b(&self) -> View<'_> {
        View::new(&self.b, self.k, self.n, self.n).unwrap()
    }

    pub fn epilogue(&self) -> Epilogue<'_> {
        Epilogue {
            bias: self.bias.as_deref(),
            activation: self.activation,
            residual: self
                .residual
                .as_ref()
                .map(|(r, stride)| View::new(r, self.m, self.n, *stride).unwrap()),
        }
    }

    /// B as the `n × k` `nn.Linear` weight (row-major, stride `k`).
    pub fn b_nk(&self) -> Vec<f32> {
        let mut w = vec![0.0; self.n * self.k];
        for p in 0..self.k {
            for j in 0..self.n {
                w[j * self.k + p] = self.b[p * self.n + j];
            }
        }
        w
    }

    /// B packed as `T` from the f32 values in `source`'s layout (storage pre-filled with NaN).
    pub fn pack<T: Element>(&self, source: Source) -> PackedB<Vec<T>, T> {
        let storage = vec![T::from_f32(f32::NAN); packed_len_of::<T>(self.k, self.n).unwrap()];
        match source {
            Source::Kn => PackedB::from_kn(storage, self.b()).unwrap(),
            Source::Nk => {
                let w = self.b_nk();
                PackedB::from_nk(storage, View::new(&w, self.n, self.k, self.k).unwrap()).unwrap()
            }
        }
    }

    /// The same product over row `i` of A (and of the residual) alone.
    pub fn row(&self, i: usize) -> Problem {
        let a = self.a[i * self.lda..][..self.k].to_vec();
        let residual = self
            .residual
            .as_ref()
            .map(|(r, stride)| (r[i * stride..][..self.n].to_vec(), self.n));
        Problem {
            m: 1,
            a,
            lda: self.k,
            residual,
            ldc: self.n,
            ..self.clone()
        }
    }

    /// Asserts that every row of `full` (this product's output) holds the bits of the same
    /// row computed alone: a row's result does not depend on how many rows share the call,
    /// which is what lets a batch of sequences decode exactly as each would alone.
    pub fn assert_rows_independent<T: Element>(
        &self,
        what: &str,
        isa: Isa,
        b: &PackedB<Vec<T>, T>,
        full: &CanaryMatrix,
    ) {
        let n = self.n;
        let full: Vec<f32> = full.elements().collect();
        for i in 0..self.m {
            let alone: Vec<f32> = self.row(i).run(isa, b, &Sequential).elements().collect();
            let same = alone
                .iter()
                .zip(&full[i * n..(i + 1) * n])
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(
                same,
                "{what} {isa}: row {i} of {} differs from the row alone",
                self.m
            );
        }
    }

    /// The reference output (rounded to f32).
    pub fn expected(&self) -> CanaryMatrix {
        let mut c = CanaryMatrix::new(self.m, self.n, self.ldc);
        let view = ViewMut::new(c.view_mut(), self.m, self.n, self.ldc).unwrap();
        reference::gemm::gemm(self.a(), self.b(), view, &self.epilogue()).unwrap();
        c
    }

    /// Runs the kernel into a canary-filled C.
    pub fn run<T: Element>(
        &self,
        isa: Isa,
        b: &PackedB<Vec<T>, T>,
        parallel: &dyn Parallel,
    ) -> CanaryMatrix {
        let mut c = CanaryMatrix::new(self.m, self.n, self.ldc);
        let mut scratch =
            vec![f32::NAN; gemm_scratch(self.m, self.k, self.n, parallel.threads()).len()];
        let view = ViewMut::new(c.view_mut(), self.m, self.n, self.ldc).unwrap();
        gemm(
            isa,
            self.a(),
            b,
            view,
            &self.epilogue(),
            &mut scratch,
            parallel,
        )
        .unwrap();
        c.assert_padding_intact(&format!("{isa} C"));
        c
    }

    /// Error bound of output `(i, j)`: the f32 dot product, the roundings of the bias,
    /// activation and residual additions, and the activation's own error.
    pub fn bound(&self, i: usize, j: usize, expected: f32) -> f64 {
        let eps = f32::EPSILON as f64;
        let mut abs_sum = 0.0f64;
        let mut dot = 0.0f64;
        for p in 0..self.k {
            let t = self.a[i * self.lda + p] as f64 * self.b[p * self.n + j] as f64;
            abs_sum += t.abs();
            dot += t;
        }
        let bias = self.bias.as_ref().map_or(0.0, |b| b[j] as f64);
        let pre = dot + bias;
        let pre_error = dot_tolerance(self.k, abs_sum) + 2.0 * eps * (pre.abs() + bias.abs());
        let (slope, own) = (self.activation.max_slope(), self.activation.max_error(pre));
        slope * pre_error + own + 4.0 * eps * (expected.abs() as f64 + pre.abs())
    }

    pub fn check(&self, what: &str, actual: &CanaryMatrix, expected: &CanaryMatrix) {
        let n = self.n.max(1);
        let values: Vec<f32> = expected.elements().collect();
        assert_close(
            what,
            actual.elements(),
            values.iter().map(|&v| v as f64),
            |idx| self.bound(idx / n, idx % n, values[idx]),
        );
    }
}

#[derive(Clone, Debug)]
pub struct Spec {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub pads: (usize, usize, usize),
    pub bias: bool,
    pub activation: usize,
    pub residual: bool,
    pub source: bool,
    pub seed: u64,
}

impl Spec {
    pub fn problem(&self, mut value: impl FnMut(&mut Values) -> f32) -> Problem {
        let Spec { m, k, n, .. } = *self;
        let mut v = Values(self.seed | 1);
        let lda = k + self.pads.0;
        let ldc = n + self.pads.1;
        let ldr = n + self.pads.2;
        Problem {
            m,
            k,
            n,
            a: v.vec(m * lda, &mut value),
            lda,
            b: v.vec(k * n, &mut value),
            bias: self.bias.then(|| v.vec(n, &mut value)),
            activation: Activation::ALL[self.activation % Activation::ALL.len()],
            residual: self.residual.then(|| (v.vec(m * ldr, &mut value), ldr)),
            ldc,
        }
    }

    pub fn source(&self) -> Source {
        if self.source {
            Source::Nk
        } else {
            Source::Kn
        }
    }
}

pub fn spec(m: BoxedStrategy<usize>, dim: usize) -> impl Strategy<Value = Spec> {
    (
        m,
        awkward_dim(dim),
        awkward_dim(dim),
        (0usize..5, 0usize..5, 0usize..5),
        any::<bool>(),
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |(m, k, n, pads, bias, activation, residual, source, seed)| Spec {
                m,
                k,
                n,
                pads,
                bias,
                activation,
                residual,
                source,
                seed,
            },
        )
}
