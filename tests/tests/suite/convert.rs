//! `narrow_to_f16` at every ISA level against `half::f16::from_f32` (round to nearest even):
//! every f16 value, every midpoint between neighbours (ties), their neighbouring f32 values,
//! values past the range, subnormals, NaN, and lengths around every vector width.

use half::f16;
use tessel_kernels::convert::narrow_to_f16;
use tessel_tests::for_each_isa;

/// Every finite f16, the f32 midpoints between neighbours and one f32 ulp either side, the
/// range's edges and beyond, infinities, NaN, and pseudo-random f32 bit patterns.
fn inputs() -> Vec<f32> {
    let mut values = Vec::new();
    for bits in 0..=u16::MAX {
        let x = f16::from_bits(bits).to_f32();
        let next = f16::from_bits(bits.wrapping_add(1)).to_f32();
        values.push(x);
        if x.is_finite() && next.is_finite() && (next - x).abs() > 0.0 {
            let mid = (x + next) / 2.0;
            values.extend([
                mid,
                f32::from_bits(mid.to_bits() + 1),
                f32::from_bits(mid.to_bits() - 1),
            ]);
        }
    }
    values.extend([
        65504.0,
        65519.99,
        65520.0,
        1e10,
        -1e10,
        f32::MIN_POSITIVE,
        1e-8,
        -1e-8,
    ]);
    values.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN]);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..100_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        values.push(f32::from_bits((state >> 32) as u32));
    }
    values
}

fn same(got: f16, want: f16) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

#[test]
fn narrowing_rounds_to_nearest_even_at_every_level() {
    let src = inputs();
    for_each_isa(|isa| {
        let mut dst = vec![f16::from_bits(0x7E01); src.len()];
        narrow_to_f16(isa, &src, &mut dst).unwrap();
        for (i, (&x, &got)) in src.iter().zip(&dst).enumerate() {
            let want = f16::from_f32(x);
            assert!(
                same(got, want),
                "{isa}: element {i}, {x:e} gave {got} not {want}"
            );
        }
    });
}

#[test]
fn every_length_and_offset_is_narrowed_whole() {
    let src: Vec<f32> = (0..70).map(|i| i as f32 * 0.37 - 11.0).collect();
    for_each_isa(|isa| {
        for start in 0..3 {
            for len in 0..=(src.len() - start) {
                let mut dst = vec![f16::NAN; len + 2];
                narrow_to_f16(isa, &src[start..start + len], &mut dst[1..len + 1]).unwrap();
                assert!(
                    dst[0].is_nan() && dst[len + 1].is_nan(),
                    "{isa}: canaries at {len}"
                );
                for (i, got) in dst[1..len + 1].iter().enumerate() {
                    assert_eq!(
                        *got,
                        f16::from_f32(src[start + i]),
                        "{isa}: {start}+{i} of {len}"
                    );
                }
            }
        }
        let mut short = [f16::ZERO; 3];
        assert!(narrow_to_f16(isa, &src[..4], &mut short).is_err());
    });
}
