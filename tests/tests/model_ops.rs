//! The model's op seam (`tessel_model::ops`) against plain f64 computations, at every ISA
//! level, over awkward shapes, with NaN canaries around strided outputs. When the seam's bodies
//! are switched to the tuned kernels these tests keep holding them to the same contract.

use proptest::prelude::*;
use tessel_kernels::activation::Activation;
use tessel_kernels::reference::activation as reference;
use tessel_model::ops::{
    argmax, attention, attention_scratch, layer_norm, linear, linear_scratch, log_softmax,
    logsumexp, AttentionShape, Epilogue, Linear, NormParams, Residual, Rows, Sequential,
};
use tessel_tests::{assert_close, awkward_dim, cases, dot_tolerance, for_each_isa, CanaryMatrix};

fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(24)))]

    #[test]
    fn linear_matches_f64(
        rows in awkward_dim(9),
        k in awkward_dim(70),
        n in awkward_dim(70),
        gap in 0usize..3,
        seed in any::<u64>(),
        bias in any::<bool>(),
        mode in 0usize..3,
    ) {
        let w_torch = values(seed, n * k, 0.5);
        let b = values(seed ^ 1, n, 0.5);
        let x = values(seed ^ 2, rows * (k + gap), 1.0);
        let r = values(seed ^ 3, rows * (n + gap), 1.0);
        let lin = Linear::from_out_in(n, k, &w_torch, bias.then_some(&b[..])).unwrap();
        let activation = if mode == 1 { Activation::Relu } else if mode == 2 { Activation::GeluErf } else { Activation::Identity };
        for_each_isa(|isa| {
            let mut out = CanaryMatrix::new(rows, n, n + gap);
            let residual = match mode {
                0 => Residual::Add(&r, n + gap),
                _ => Residual::None,
            };
            let mut scratch = vec![0.0; linear_scratch(rows, k, n, 1).len()];
            let stride = out.stride();
            linear(isa, rows, &x, k + gap, &lin, out.view_mut(), stride,
                Epilogue { activation, residual }, &mut scratch, &Sequential).unwrap();
            let mut expected = Vec::new();
            let mut bounds = Vec::new();
            for i in 0..rows {
                for j in 0..n {
                    let mut acc = if bias { b[j] as f64 } else { 0.0 };
                    let mut abs = acc.abs();
                    for kk in 0..k {
                        let t = x[i * (k + gap) + kk] as f64 * w_torch[j * k + kk] as f64;
                        acc += t;
                        abs += t.abs();
                    }
                    acc = match activation {
                        Activation::Relu => acc.max(0.0),
                        Activation::GeluErf => reference::apply(Activation::GeluErf, acc),
                        _ => acc,
                    };
                    if mode == 0 {
                        acc += r[i * (n + gap) + j] as f64;
                        abs += r[i * (n + gap) + j].abs() as f64;
                    }
                    expected.push(acc);
                    bounds.push(dot_tolerance(k + 2, abs) + 2e-6 * abs);
                }
            }
            assert_close(&format!("linear {isa}"), out.elements(), expected, |i| bounds[i]);
            out.assert_padding_intact("linear out");
        });
    }

    #[test]
    fn attention_matches_f64(
        heads in 1usize..4,
        d_head in awkward_dim(40).prop_filter("positive", |&d| d > 0),
        q_rows in awkward_dim(7),
        kv_len in awkward_dim(150),
        causal in proptest::option::of(0usize..5),
        gap in 0usize..3,
        seed in any::<u64>(),
    ) {
        let w = heads * d_head;
        let stride = w + gap;
        let q = values(seed, q_rows * stride, 2.0);
        let k = values(seed ^ 5, kv_len * stride, 2.0);
        let v = values(seed ^ 6, kv_len * stride, 1.0);
        let shape = AttentionShape { heads, d_head, q_rows, kv_len, causal_offset: causal };
        let scale = 1.0 / (d_head as f32).sqrt();
        for_each_isa(|isa| {
            let mut out = CanaryMatrix::new(q_rows, w, stride);
            let mut scratch = vec![0.0; attention_scratch(&shape).len()];
            let os = out.stride();
            attention(isa, shape, Rows { data: &q, stride }, Rows { data: &k, stride },
                Rows { data: &v, stride }, out.view_mut(), os, scale, &mut scratch).unwrap();
            let mut expected = Vec::new();
            for i in 0..q_rows {
                let visible = causal.map_or(kv_len, |o| kv_len.min(o + i + 1));
                for h in 0..heads {
                    let c = h * d_head;
                    let s: Vec<f64> = (0..visible).map(|j| {
                        (0..d_head).map(|t| q[i * stride + c + t] as f64 * k[j * stride + c + t] as f64).sum::<f64>() * scale as f64
                    }).collect();
                    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                    let z: f64 = p.iter().sum();
                    for t in 0..d_head {
                        let o = if visible == 0 { 0.0 } else {
                            (0..visible).map(|j| p[j] * v[j * stride + c + t] as f64).sum::<f64>() / z
                        };
                        expected.push(o);
                    }
                }
            }
            let bound = 1e-5 * (1.0 + (kv_len as f64).sqrt()) + 4.0 * dot_tolerance(d_head, 4.0 * d_head as f64);
            assert_close(&format!("attention {isa}"), out.elements(), expected, |_| bound);
            out.assert_padding_intact("attention out");
        });
    }

    #[test]
    fn layer_norm_matches_f64(
        rows in awkward_dim(6),
        cols in awkward_dim(100).prop_filter("positive", |&d| d > 0),
        with_residual in any::<bool>(),
        offset in prop_oneof![Just(0.0f32), Just(1e4f32), Just(1e9f32)],
        seed in any::<u64>(),
    ) {
        let x: Vec<f32> = values(seed, rows * cols, 3.0).iter().map(|v| v + offset).collect();
        let r = values(seed ^ 9, rows * cols, 1.0);
        let gamma = values(seed ^ 10, cols, 1.0);
        let beta = values(seed ^ 11, cols, 1.0);
        let eps = 1e-5f32;
        for_each_isa(|isa| {
            let mut out = CanaryMatrix::new(rows, cols, cols + 1);
            let mut sum = CanaryMatrix::new(rows, cols, cols);
            let (os, ss) = (out.stride(), sum.stride());
            layer_norm(isa, rows, Rows { data: &x, stride: cols },
                with_residual.then_some(Rows { data: &r, stride: cols }),
                NormParams { gamma: &gamma, beta: &beta, eps },
                out.view_mut(), os, Some((sum.view_mut(), ss))).unwrap();
            let mut expected = Vec::new();
            let mut sums = Vec::new();
            for i in 0..rows {
                let row: Vec<f64> = (0..cols).map(|j| {
                    let s = x[i * cols + j] + if with_residual { r[i * cols + j] } else { 0.0 };
                    s as f64
                }).collect();
                sums.extend(row.iter().cloned());
                let mean = row.iter().sum::<f64>() / cols as f64;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
                for j in 0..cols {
                    expected.push((row[j] - mean) / (var + eps as f64).sqrt() * gamma[j] as f64 + beta[j] as f64);
                }
            }
            // Relative to the row's magnitude over its spread (the large-offset case).
            let bound = 1e-5 * (cols as f64).sqrt() + 1e-5;
            assert_close(&format!("layer_norm {isa}"), out.elements(), expected, |_| bound);
            assert_close("layer_norm sum", sum.elements(), sums, |_| 0.0);
            out.assert_padding_intact("layer_norm out");
            sum.assert_padding_intact("layer_norm sum");
        });
    }

    #[test]
    fn log_softmax_and_argmax_match_f64(n in awkward_dim(300).prop_filter("positive", |&d| d > 0), seed in any::<u64>(), shift in prop_oneof![Just(0.0f32), Just(1234.0f32)]) {
        let x: Vec<f32> = values(seed, n, 8.0).iter().map(|v| v + shift).collect();
        let m = x.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
        let lse = m + x.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
        for_each_isa(|isa| {
            let mut y = x.clone();
            let got = log_softmax(isa, &mut y);
            let tol = 1e-5 * (1.0 + lse.abs());
            assert!((got as f64 - lse).abs() <= tol, "{isa}: normaliser {got} vs {lse}");
            assert!((logsumexp(isa, &x) as f64 - lse).abs() <= tol, "{isa}: logsumexp");
            assert_close("log_softmax", y.iter().cloned(), x.iter().map(|&v| v as f64 - lse), |_| tol + 1e-5 * 16.0);
        });
        let (i, v) = argmax(&x).unwrap();
        prop_assert_eq!(v as f64, m);
        prop_assert!(x[..i].iter().all(|&u| u < v));
    }
}

#[test]
fn argmax_skips_nan_and_handles_empty() {
    assert_eq!(argmax(&[]), None);
    assert_eq!(argmax(&[f32::NAN, 1.0, f32::NAN, 3.0, 3.0]), Some((3, 3.0)));
    assert_eq!(argmax(&[f32::NAN]), None);
}

#[test]
fn ops_refuse_bad_shapes() {
    let isa = tessel_kernels::Isa::scalar();
    let lin = Linear::from_out_in(3, 2, &[0.0; 6], None).unwrap();
    assert!(Linear::from_out_in(3, 2, &[0.0; 5], None).is_err());
    let mut out = [0.0; 6];
    assert!(linear(
        isa,
        2,
        &[0.0; 3],
        2,
        &lin,
        &mut out,
        3,
        Epilogue::PLAIN,
        &mut [],
        &Sequential
    )
    .is_err());
    assert!(linear(
        isa,
        2,
        &[0.0; 4],
        2,
        &lin,
        &mut out[..5],
        3,
        Epilogue::PLAIN,
        &mut [],
        &Sequential
    )
    .is_err());
    let shape = AttentionShape {
        heads: 2,
        d_head: 2,
        q_rows: 1,
        kv_len: 3,
        causal_offset: None,
    };
    let q = Rows {
        data: &[0.0; 4],
        stride: 4,
    };
    let kv = Rows {
        data: &[0.0; 11],
        stride: 4,
    };
    let mut scratch = vec![0.0; attention_scratch(&shape).len()];
    assert!(attention(isa, shape, q, kv, kv, &mut [0.0; 4], 4, 1.0, &mut scratch).is_err());
    assert!(attention(
        isa,
        AttentionShape { heads: 0, ..shape },
        q,
        kv,
        kv,
        &mut [0.0; 4],
        4,
        1.0,
        &mut scratch
    )
    .is_err());
}
