//! The model's layers (`tessel_model::layers`) and search arithmetic (`tessel_model::ops`)
//! against plain f64 computations, at every ISA level, over awkward shapes, with NaN canaries
//! around strided outputs.

use proptest::prelude::*;
use tessel_kernels::activation::Activation;
use tessel_kernels::attention::Mask;
use tessel_kernels::gemm::Sequential;
use tessel_kernels::reference::activation as reference;
use tessel_kernels::{View, ViewMut};
use tessel_model::aligned::AlignedBuf;
use tessel_model::layers::{linear, Heads, Linear, Norm, Run};
use tessel_model::ops::{argmax, log_softmax, logsumexp, max};
use tessel_tests::runners::Threads;
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
            let residual = (mode == 0).then(|| View::new(&r, rows, n, n + gap).unwrap());
            let mut scratch = vec![0.0; linear::scratch(rows, k, n, 1).len()];
            let stride = out.stride();
            let run = Run { isa, parallel: &Sequential };
            let x_view = View::new(&x, rows, k, k + gap).unwrap();
            let out_view = ViewMut::new(out.view_mut(), rows, n, stride).unwrap();
            lin.forward(run, x_view, out_view, activation, residual, &mut scratch).unwrap();
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
        let scale = 1.0 / (d_head as f32).sqrt();
        let layout = Heads { heads, d_head, scale };
        let mask = Mask { causal_offset: causal, ..Mask::NONE };
        for_each_isa(|isa| {
            let mut out = CanaryMatrix::new(q_rows, w, stride);
            let mut scratch = vec![0.0; layout.scratch(q_rows, kv_len, 2).len()];
            let os = out.stride();
            let run = Run { isa, parallel: &Threads::new(2) };
            let views = (View::new(&q, q_rows, w, stride).unwrap(),
                View::new(&k, kv_len, w, stride).unwrap(), View::new(&v, kv_len, w, stride).unwrap());
            let out_view = ViewMut::new(out.view_mut(), q_rows, w, os).unwrap();
            layout.attend(run, views, &mask, out_view, &mut scratch).unwrap();
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
    fn norm_layers_match_f64(
        rows in awkward_dim(6),
        cols in awkward_dim(100).prop_filter("positive", |&d| d > 0),
        rms in any::<bool>(),
        offset in prop_oneof![Just(0.0f32), Just(1e4f32), Just(1e9f32)],
        seed in any::<u64>(),
    ) {
        let x: Vec<f32> = values(seed, rows * cols, 3.0).iter().map(|v| v + offset).collect();
        let gamma = values(seed ^ 10, cols, 1.0);
        let beta = values(seed ^ 11, cols, 1.0);
        let eps = 1e-5f32;
        let buf = |v: &[f32]| AlignedBuf::from_slice(v).unwrap();
        let norm = if rms {
            Norm::rms(buf(&gamma), eps)
        } else {
            Norm::layer(buf(&gamma), buf(&beta), eps)
        };
        let mut expected = Vec::new();
        for i in 0..rows {
            let row: Vec<f64> = x[i * cols..(i + 1) * cols].iter().map(|&v| v as f64).collect();
            let mean = if rms { 0.0 } else { row.iter().sum::<f64>() / cols as f64 };
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
            for j in 0..cols {
                let shift = if rms { 0.0 } else { beta[j] as f64 };
                expected.push((row[j] - mean) / (var + eps as f64).sqrt() * gamma[j] as f64 + shift);
            }
        }
        for_each_isa(|isa| {
            let mut out = CanaryMatrix::new(rows, cols, cols);
            let out_view = ViewMut::new(out.view_mut(), rows, cols, cols).unwrap();
            norm.forward(isa, View::new(&x, rows, cols, cols).unwrap(), out_view).unwrap();
            // Relative to the row's magnitude over its spread (the large-offset case).
            let bound = 1e-5 * (cols as f64).sqrt() + 1e-5;
            let bound = if rms { bound * 4.0 } else { bound };
            assert_close(&format!("norm {isa}"), out.elements(), expected.iter().cloned(), |_| bound);
            out.assert_padding_intact("norm out");
            let mut in_place = x.clone();
            norm.forward_in_place(isa, ViewMut::new(&mut in_place, rows, cols, cols).unwrap()).unwrap();
            assert_close("norm in place", in_place.iter().cloned(), out.elements().map(|v| v as f64), |_| 0.0);
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
        for_each_isa(|isa| {
            let (i, v) = argmax(isa, &x).unwrap();
            assert_eq!(v as f64, m, "{isa}");
            assert!(x[..i].iter().all(|&u| u < v), "{isa}");
        });
    }

    #[test]
    fn argmax_is_the_first_of_the_largest(n in 0usize..300, seed in any::<u64>(), specials in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..6), 0..8)) {
        // Few distinct values, so ties are common, with NaN, infinities and signed zeros
        // dropped in.
        let mut x: Vec<f32> = values(seed, n, 3.0).iter().map(|v| v.round()).collect();
        let kinds = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 3.0];
        if n > 0 {
            for (at, kind) in &specials {
                x[at.index(n)] = kinds[*kind];
            }
        }
        let expected = argmax_fold(&x);
        let folded = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        for_each_isa(|isa| {
            assert_eq!(argmax(isa, &x).map(|(i, v)| (i, v.to_bits())), expected.map(|(i, v)| (i, v.to_bits())), "{isa}: {x:?}");
            // Equal as numbers: a zero maximum may come with either sign.
            assert_eq!(max(isa, &x), folded, "{isa}: {x:?}");
        });
    }
}

/// The one-pass fold: the first value strictly larger than every earlier one, NaN skipped.
fn argmax_fold(values: &[f32]) -> Option<(usize, f32)> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in values.iter().enumerate() {
        let better = match best {
            Some((_, b)) => v > b,
            None => !v.is_nan(),
        };
        if better {
            best = Some((i, v));
        }
    }
    best
}

#[test]
fn argmax_skips_nan_and_handles_empty() {
    for_each_isa(|isa| {
        assert_eq!(argmax(isa, &[]), None);
        assert_eq!(
            argmax(isa, &[f32::NAN, 1.0, f32::NAN, 3.0, 3.0]),
            Some((3, 3.0))
        );
        assert_eq!(argmax(isa, &[f32::NAN]), None);
        assert_eq!(
            argmax(isa, &[f32::NEG_INFINITY, f32::NAN]),
            Some((0, f32::NEG_INFINITY))
        );
    });
}

#[test]
fn layers_refuse_bad_shapes() {
    let isa = tessel_kernels::Isa::scalar();
    let run = Run {
        isa,
        parallel: &Sequential,
    };
    let lin = Linear::from_out_in(3, 2, &[0.0; 6], None).unwrap();
    assert!(Linear::from_out_in(3, 2, &[0.0; 5], None).is_err());
    let mut out = [0.0; 6];
    let identity = Activation::Identity;
    // Three input features where the layer takes two, then two outputs where it gives three.
    let wide = View::new(&[0.0; 6], 2, 3, 3).unwrap();
    let out_view = ViewMut::new(&mut out, 2, 3, 3).unwrap();
    assert!(lin
        .forward(run, wide, out_view, identity, None, &mut [])
        .is_err());
    let x = View::new(&[0.0; 4], 2, 2, 2).unwrap();
    let narrow = ViewMut::new(&mut out, 2, 2, 2).unwrap();
    assert!(lin
        .forward(run, x, narrow, identity, None, &mut [])
        .is_err());
    let layout = Heads {
        heads: 2,
        d_head: 2,
        scale: 1.0,
    };
    let q = View::new(&[0.0; 4], 1, 4, 4).unwrap();
    assert!(View::new(&[0.0; 11], 3, 4, 4).is_err());
    let kv = View::new(&[0.0; 12], 3, 4, 4).unwrap();
    let mut scratch = vec![0.0; layout.scratch(1, 3, 1).len()];
    let none = &Mask::NONE;
    let mut out = [0.0; 4];
    let wide_q = View::new(&[0.0; 6], 1, 6, 6).unwrap();
    assert!(layout
        .attend(
            run,
            (wide_q, kv, kv),
            none,
            ViewMut::new(&mut out, 1, 4, 4).unwrap(),
            &mut scratch
        )
        .is_err());
    let no_heads = Heads { heads: 0, ..layout };
    assert!(no_heads
        .attend(
            run,
            (q, kv, kv),
            none,
            ViewMut::new(&mut out, 1, 4, 4).unwrap(),
            &mut scratch
        )
        .is_err());
    let gamma = AlignedBuf::from_slice(&[1.0; 4]).unwrap();
    let norm = Norm::rms(gamma, 1e-6);
    let x = View::new(&[0.0; 6], 2, 3, 3).unwrap();
    let mut out = [0.0; 6];
    assert!(norm
        .forward(isa, x, ViewMut::new(&mut out, 2, 3, 3).unwrap())
        .is_err());
}
