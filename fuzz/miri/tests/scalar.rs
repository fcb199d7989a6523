//! Every kernel at `Isa::scalar()` (which needs no CPUID, so Miri can run it) on small awkward
//! shapes with stride gaps, masks and every epilogue, checked against the references: under
//! `cargo +nightly miri test` this looks for undefined behaviour (out-of-bounds or misaligned
//! accesses, invalid pointer arithmetic, uninitialised reads) in the kernels' unsafe code and
//! the pulp scalar path. Shapes are tiny because Miri interprets every instruction.

use tessel_kernels::activation::{bias_activation_into, Activation};
use tessel_kernels::attention::{attention, attention_scratch, AttentionShape, Bias, Mask};
use tessel_kernels::attention::{attention_parallel_scratch, attention_split, Split};
use tessel_kernels::gemm::{gemm, gemm_scratch, packed_len, Epilogue, PackedB};
use tessel_kernels::gemm::{Parallel, Sequential};
use tessel_kernels::math::exp_slice;
use tessel_kernels::norm::{
    accumulate_normalize, add_normalize, normalize, normalize_in_place, Norm,
};
use tessel_kernels::reference;
use tessel_kernels::softmax::softmax_in_place;
use tessel_kernels::{Isa, Scratch, ScratchSpec};
use tessel_kernels::{View, ViewMut};

const ISA: Isa = Isa::scalar();

/// Deterministic values in [-2, 2).
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + seed * 11) % 64) as f32 / 16.0 - 2.0)
        .collect()
}

fn close(what: &str, got: f32, want: f32) {
    let bound = 1e-4 * (1.0 + want.abs());
    assert!(
        (got - want).abs() <= bound || (got.is_nan() && want.is_nan()),
        "{what}: {got} vs {want}"
    );
}

/// Runs tasks in reverse order on the calling thread, claiming two threads.
struct TwoThreads;

impl Parallel for TwoThreads {
    fn threads(&self) -> usize {
        2
    }
    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        for i in (0..tasks).rev() {
            task(i);
        }
    }
}

#[test]
fn gemm_matches_the_reference_with_gaps_and_epilogues() {
    // m = 17 crosses the small-m path into the tiled driver with a zero-padded edge tile.
    for &(m, k, n) in &[(1, 3, 5), (3, 1, 33), (17, 2, 3), (2, 0, 4)] {
        let (lda, ldc, ldr) = (k + 1, n + 2, n + 3);
        let a = values(span(m, k, lda), 1);
        let b = values(k * n, 2);
        let bias = values(n, 3);
        let residual = values(span(m, n, ldr), 4);
        let packed = PackedB::from_kn(
            vec![0.0; packed_len(k, n).unwrap()],
            View::new(&b, k, n, n).unwrap(),
        )
        .unwrap();
        let epilogue = Epilogue {
            bias: Some(&bias),
            activation: Activation::GeluTanh,
            residual: Some(View::new(&residual, m, n, ldr).unwrap()),
        };
        let runners: [&dyn Parallel; 2] = [&Sequential, &TwoThreads];
        for runner in runners {
            let mut c = vec![f32::NAN; span(m, n, ldc)];
            let mut scratch = vec![0.0; gemm_scratch(m, k, n, runner.threads()).len()];
            gemm(
                ISA,
                View::new(&a, m, k, lda).unwrap(),
                &packed,
                ViewMut::new(&mut c, m, n, ldc).unwrap(),
                &epilogue,
                &mut scratch,
                runner,
            )
            .unwrap();
            let mut want = vec![0.0; m * n];
            reference::gemm::gemm(
                View::new(&a, m, k, lda).unwrap(),
                View::new(&b, k, n, n).unwrap(),
                ViewMut::new(&mut want, m, n, n).unwrap(),
                &epilogue,
            )
            .unwrap();
            for i in 0..m {
                for j in 0..n {
                    close("gemm", c[i * ldc + j], want[i * n + j]);
                }
                for j in n..ldc.min(c.len() - i * ldc) {
                    assert!(c[i * ldc + j].is_nan(), "gap written");
                }
            }
        }
    }
}

#[test]
fn packing_from_either_layout_agrees() {
    let (k, n) = (3, 35);
    let b = values(k * (n + 1), 5);
    let bt: Vec<f32> = (0..n * k).map(|x| b[(x % k) * (n + 1) + x / k]).collect();
    let len = packed_len(k, n).unwrap();
    let kn = PackedB::from_kn(vec![0.0; len], View::new(&b, k, n, n + 1).unwrap()).unwrap();
    let nk = PackedB::from_nk(vec![0.0; len], View::new(&bt, n, k, k).unwrap()).unwrap();
    assert_eq!(kn.as_slice(), nk.as_slice());
}

fn span(rows: usize, cols: usize, stride: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * stride + cols
    }
}

#[test]
fn attention_matches_the_reference_on_both_paths() {
    // q_len 1 to 8 takes the decode path (several queries sharing each K and V load), 9 the
    // prefill path; per-head bias with -inf entries, causal offset, window and key padding.
    let cases = [
        (2, 3, 1, 6),
        (1, 5, 5, 7),
        (3, 2, 2, 3),
        (2, 3, 8, 10),
        (1, 5, 9, 11),
    ];
    for &(heads, d_head, q_len, kv_len) in &cases {
        let shape = AttentionShape {
            heads,
            d_head,
            q_len,
            kv_len,
        };
        let width = heads * d_head;
        let stride = width + 1;
        let q = values(span(q_len, width, stride), 6);
        let k = values(span(kv_len, width, stride), 7);
        let v = values(span(kv_len, width, stride), 8);
        let row_stride = kv_len + 1;
        let per_head = span(q_len, kv_len, row_stride);
        let mut bias = values(heads * per_head, 9);
        bias[0] = f32::NEG_INFINITY;
        let mask = Mask {
            causal_offset: Some(kv_len.saturating_sub(q_len)),
            key_len: Some(kv_len - 1),
            window: Some(4),
            bias: Some(Bias::dense(&bias, row_stride, per_head)),
            ..Mask::NONE
        };
        let mut out = vec![f32::NAN; span(q_len, width, stride)];
        let mut scratch = vec![0.0; attention_scratch(ISA, &shape).len()];
        let (qv, kv, vv) = (
            View::new(&q, q_len, width, stride).unwrap(),
            View::new(&k, kv_len, width, stride).unwrap(),
            View::new(&v, kv_len, width, stride).unwrap(),
        );
        attention(
            ISA,
            &shape,
            qv,
            kv,
            vv,
            ViewMut::new(&mut out, q_len, width, stride).unwrap(),
            &mask,
            None,
            &mut scratch,
        )
        .unwrap();
        let mut want = vec![f32::NAN; out.len()];
        let mut acc = vec![0.0f64; d_head];
        reference::attention::attention(
            &shape,
            qv,
            kv,
            vv,
            ViewMut::new(&mut want, q_len, width, stride).unwrap(),
            &mask,
            None,
            &mut acc,
        )
        .unwrap();
        for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
            if i % stride < width {
                close("attention", g, w);
            } else {
                assert!(g.is_nan(), "gap written");
            }
        }
    }
}

/// Runs the tasks on two scoped threads at once (Miri checks them for data races).
struct ScopedPair;

impl Parallel for ScopedPair {
    fn threads(&self) -> usize {
        2
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        std::thread::scope(|scope| {
            scope.spawn(|| (0..tasks).step_by(2).for_each(task));
            (1..tasks).step_by(2).for_each(task);
        });
    }
}

#[test]
fn attention_split_over_threads_equals_one_call() {
    // 3 queries split by heads (each head's rows copied out of the task's scratch), 33 queries
    // split by rows (query blocks of 16 at the scalar level, the one-row last run merged).
    for &(heads, d_head, q_len, kv_len) in &[(3, 2, 3, 5), (2, 2, 33, 34)] {
        let shape = AttentionShape {
            heads,
            d_head,
            q_len,
            kv_len,
        };
        let width = heads * d_head;
        let stride = width + 1;
        let q = values(span(q_len, width, stride), 1);
        let k = values(span(kv_len, width, stride), 2);
        let v = values(span(kv_len, width, stride), 3);
        let mask = Mask {
            causal_offset: Some(kv_len - q_len),
            ..Mask::NONE
        };
        let views = (
            View::new(&q, q_len, width, stride).unwrap(),
            View::new(&k, kv_len, width, stride).unwrap(),
            View::new(&v, kv_len, width, stride).unwrap(),
        );
        let mut one = vec![f32::NAN; span(q_len, width, stride)];
        let mut scratch = vec![0.0; attention_scratch(ISA, &shape).len()];
        let out = ViewMut::new(&mut one, q_len, width, stride).unwrap();
        attention(
            ISA,
            &shape,
            views.0,
            views.1,
            views.2,
            out,
            &mask,
            None,
            &mut scratch,
        )
        .unwrap();
        let mut split = vec![f32::NAN; one.len()];
        let mut scratch = vec![0.0; attention_parallel_scratch(ISA, &shape, 2).len()];
        let how = Split {
            parallel: &ScopedPair,
            min_task_work: 1,
        };
        let out = ViewMut::new(&mut split, q_len, width, stride).unwrap();
        attention_split(
            ISA,
            how,
            &shape,
            views.0,
            views.1,
            views.2,
            out,
            &mask,
            None,
            &mut scratch,
        )
        .unwrap();
        for (i, (a, b)) in one.iter().zip(&split).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "element {i} of {shape:?}");
        }
    }
}

#[test]
fn row_kernels_match_the_references() {
    for &(rows, width) in &[(1, 1), (3, 5), (2, 17)] {
        let shape = (rows, width);
        let stride = width + 2;
        let len = span(rows, width, stride);
        let x = values(len, 10);
        let residual = values(len, 11);
        let gamma = values(width, 12);
        let beta = values(width, 13);
        for norm in [Norm::layer(&gamma, &beta, 1e-5), Norm::rms(&gamma, 1e-5)] {
            let mut out = vec![f32::NAN; len];
            normalize(
                ISA,
                norm,
                rows_of(&x, shape, stride),
                rows_mut(&mut out, shape, stride),
            )
            .unwrap();
            let mut in_place = x.clone();
            normalize_in_place(ISA, norm, rows_mut(&mut in_place, shape, stride)).unwrap();
            let mut sum = vec![f32::NAN; len];
            let mut added = vec![f32::NAN; len];
            add_normalize(
                ISA,
                norm,
                rows_of(&x, shape, stride),
                rows_of(&residual, shape, stride),
                Some(rows_mut(&mut sum, shape, stride)),
                rows_mut(&mut added, shape, stride),
            )
            .unwrap();
            let mut acc = residual.clone();
            let mut acc_out = vec![f32::NAN; len];
            accumulate_normalize(
                ISA,
                norm,
                rows_mut(&mut acc, shape, stride),
                rows_of(&x, shape, stride),
                rows_mut(&mut acc_out, shape, stride),
            )
            .unwrap();
            for r in 0..rows {
                let row = |v: &[f32]| v[r * stride..][..width].to_vec();
                let mut want = vec![0.0f64; width];
                reference::norm::normalize_row(norm, &row(&x), &mut want);
                for c in 0..width {
                    close("normalize", out[r * stride + c], want[c] as f32);
                    close("in place", in_place[r * stride + c], want[c] as f32);
                }
                let mut s = vec![0.0; width];
                reference::norm::add(&row(&x), &row(&residual), &mut s);
                reference::norm::normalize_row(norm, &s, &mut want);
                for c in 0..width {
                    assert_eq!(sum[r * stride + c], s[c]);
                    assert_eq!(acc[r * stride + c], s[c]);
                    close("add_normalize", added[r * stride + c], want[c] as f32);
                    close("accumulate", acc_out[r * stride + c], want[c] as f32);
                }
            }
        }
        let mut soft = x.clone();
        softmax_in_place(ISA, rows_mut(&mut soft, shape, stride), 0.5).unwrap();
        let mut act = vec![f32::NAN; len];
        bias_activation_into(
            ISA,
            rows_of(&x, shape, stride),
            Some(&beta),
            Activation::GeluErf,
            rows_mut(&mut act, shape, stride),
        )
        .unwrap();
        for r in 0..rows {
            let mut want = vec![0.0f64; width];
            reference::norm::softmax_row(0.5, &x[r * stride..][..width], &mut want);
            for c in 0..width {
                close("softmax", soft[r * stride + c], want[c] as f32);
                let pre = x[r * stride + c] + beta[c];
                let a = reference::activation::apply(Activation::GeluErf, pre as f64) as f32;
                close("gelu", act[r * stride + c], a);
            }
        }
    }
    let mut e = values(11, 14);
    let want: Vec<f32> = e.iter().map(|v| v.exp()).collect();
    exp_slice(ISA, &mut e);
    for (g, w) in e.iter().zip(&want) {
        close("exp", *g, *w);
    }
}

#[test]
fn scratch_parts_are_aligned_at_any_offset() {
    let spec = ScratchSpec::f32s(5).and(ScratchSpec::f32s(17));
    let mut buffer = vec![0.0f32; spec.len() + 3];
    for offset in 0..4 {
        let mut scratch = Scratch::new(&mut buffer[offset..], spec).unwrap();
        let a = scratch.take(5).unwrap();
        a.fill(1.0);
        let b = scratch.take(17).unwrap();
        b.fill(2.0);
        assert_eq!(b.as_ptr() as usize % 64, 0);
    }
}

/// A `(rows, width)` view of `data`, rows `stride` apart.
fn rows_of(data: &[f32], (rows, width): (usize, usize), stride: usize) -> View<'_> {
    View::new(data, rows, width, stride).unwrap()
}

/// A writable `(rows, width)` view of `data`, rows `stride` apart.
fn rows_mut(data: &mut [f32], (rows, width): (usize, usize), stride: usize) -> ViewMut<'_> {
    ViewMut::new(data, rows, width, stride).unwrap()
}
