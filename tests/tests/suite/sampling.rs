//! Sampling (`SearchOptions::sampling`): one step's empirical distribution against
//! `softmax(logits / T)` (chi-square bound, fixed seeds), the top-k and top-p cuts, seed
//! determinism, top-k 1 and temperature → 0 against greedy search, the score as the sum of
//! untempered processed log-probabilities (teacher-forced), and refused options.

use tessel_kernels::Isa;
use tessel_model::ops::log_softmax;
use tessel_model::sampling::sample;
use tessel_model::{
    Config, FfnActivation, Model, NormPlacement, Positions, Request, RunError, Sampling,
    SearchOptions, Session,
};
use tessel_tests::for_each_isa;

const NEG: f32 = f32::NEG_INFINITY;

/// A row with spread logits, ties and removed tokens.
const ROW: [f32; 13] = [
    1.0, -0.5, NEG, 2.2, 0.3, 2.2, -3.0, 0.9, NEG, 1.7, -1.1, 0.0, 2.9,
];

/// `softmax(row / t)` over the tokens with logit ≥ `floor`, in f64.
fn tempered(row: &[f32], t: f64, floor: f32) -> Vec<f64> {
    let max = row.iter().fold(NEG, |m, &v| m.max(v)) as f64;
    let w: Vec<f64> = row
        .iter()
        .map(|&v| {
            if v >= floor && v > NEG {
                ((v as f64 - max) / t).exp()
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

/// Draw counts of `n` samples.
fn counts(row: &[f32], options: &Sampling, n: usize) -> Vec<usize> {
    let mut rng = options.rng();
    let mut c = vec![0; row.len()];
    for _ in 0..n {
        c[sample(Isa::best(), row, options, &mut rng).expect("a token") as usize] += 1;
    }
    c
}

/// Pearson's chi-square of `observed` against `n · p` over the tokens with `p > 0`, and its
/// degrees of freedom; a token with `p = 0` drawn at all fails.
fn chi_square(observed: &[usize], p: &[f64], n: usize) -> (f64, usize) {
    let mut chi = 0.0;
    let mut cells = 0;
    for (&o, &p) in observed.iter().zip(p) {
        if p == 0.0 {
            assert_eq!(o, 0, "a removed token was drawn");
            continue;
        }
        let e = p * n as f64;
        chi += (o as f64 - e).powi(2) / e;
        cells += 1;
    }
    (chi, cells - 1)
}

/// The chi-square value exceeded with probability ~1e-4 at `df` degrees of freedom
/// (Wilson–Hilferty with z = 3.72).
fn chi_bound(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.72;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

#[test]
fn one_step_matches_the_tempered_softmax() {
    let n = 40_000;
    for (t, seed) in [(1.0, 1u64), (0.6, 2), (1.7, 3)] {
        let options = Sampling::temperature(t, seed);
        let observed = counts(&ROW, &options, n);
        let p = tempered(&ROW, t as f64, NEG);
        let (chi, df) = chi_square(&observed, &p, n);
        assert!(chi < chi_bound(df), "T {t}: chi² {chi} over {df} dof");
    }
}

#[test]
fn top_k_and_top_p_keep_the_most_likely_tokens() {
    let n = 30_000;
    // Top-k 4: 2.9, 2.2, 2.2 and 1.7 (the ties at 2.2 both count).
    let top_k = Sampling {
        top_k: 4,
        ..Sampling::temperature(0.8, 5)
    };
    let observed = counts(&ROW, &top_k, n);
    let (chi, df) = chi_square(&observed, &tempered(&ROW, 0.8, 1.7), n);
    assert!(chi < chi_bound(df), "top-k chi² {chi}");
    // Top-k 2 with a tie at the cut keeps both 2.2s.
    let tie = Sampling {
        top_k: 2,
        ..Sampling::temperature(1.0, 6)
    };
    let observed = counts(&ROW, &tie, n);
    assert!(observed[3] > 0 && observed[5] > 0 && observed[12] > 0);
    assert_eq!(
        observed.iter().sum::<usize>(),
        observed[3] + observed[5] + observed[12]
    );
    // Top-p: the nucleus is the most likely tokens up to the first whose cumulative mass
    // reaches p (computed here by sorting).
    for p in [0.3f32, 0.75, 0.95] {
        let options = Sampling {
            top_p: p,
            ..Sampling::temperature(1.3, 7)
        };
        let full = tempered(&ROW, 1.3, NEG);
        let mut order: Vec<usize> = (0..ROW.len()).collect();
        order.sort_by(|&a, &b| ROW[b].total_cmp(&ROW[a]));
        let mut mass = 0.0;
        let mut floor = NEG;
        for &i in &order {
            mass += full[i];
            floor = ROW[i];
            if mass >= p as f64 {
                break;
            }
        }
        let observed = counts(&ROW, &options, n);
        let (chi, df) = chi_square(&observed, &tempered(&ROW, 1.3, floor), n);
        assert!(chi < chi_bound(df.max(1)), "top-p {p}: chi² {chi}");
    }
}

#[test]
fn nothing_to_draw_and_infinite_logits() {
    let options = Sampling::temperature(1.0, 0);
    for_each_isa(|isa| {
        let mut rng = options.rng();
        assert_eq!(sample(isa, &[NEG, NEG], &options, &mut rng), None);
        assert_eq!(sample(isa, &[], &options, &mut rng), None);
        assert_eq!(sample(isa, &[f32::NAN, 0.5], &options, &mut rng), Some(1));
        assert_eq!(
            sample(isa, &[0.5, f32::INFINITY, 3.0], &options, &mut rng),
            Some(1)
        );
    });
}

fn small() -> Config {
    Config {
        d_model: 40,
        heads: 5,
        encoder_layers: 2,
        decoder_layers: 2,
        d_ff: 72,
        src_vocab: 31,
        tgt_vocab: 37,
        max_src_len: 12,
        max_tgt_len: 12,
        max_beam: 3,
        norm: NormPlacement::Pre,
        activation: FfnActivation::Relu,
        positions: Positions::Learned,
        ..Config::transformer_base()
    }
}

const SRC: [u32; 7] = [4, 17, 3, 30, 8, 21, 5];

fn run(session: &mut Session<&Model>, options: &SearchOptions) -> (Vec<u32>, f32) {
    session.encode(&SRC).unwrap();
    let hyps = session.generate(Request::new(*options)).unwrap();
    let best = hyps.best().unwrap();
    (best.tokens.to_vec(), best.score)
}

#[test]
fn seeds_repeat_and_differ_and_the_limits_are_greedy() {
    let model = Model::random(small(), 11).unwrap();
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).unwrap();
        let greedy = run(&mut session, &SearchOptions::greedy(10));
        let mut distinct = std::collections::BTreeSet::new();
        for seed in 0..8 {
            let options = SearchOptions::sample(Sampling::temperature(1.5, seed), 10);
            let first = run(&mut session, &options);
            assert_eq!(run(&mut session, &options), first, "seed {seed} repeats");
            distinct.insert(first.0);
        }
        assert!(distinct.len() > 1, "different seeds draw differently");
        for limit in [
            Sampling {
                top_k: 1,
                ..Sampling::temperature(1.0, 3)
            },
            Sampling::temperature(0.0, 3),
            Sampling::temperature(1e-7, 3),
        ] {
            let sampled = run(&mut session, &SearchOptions::sample(limit, 10));
            assert_eq!(sampled.0, greedy.0, "{limit:?}");
            assert_eq!(sampled.1.to_bits(), greedy.1.to_bits(), "{limit:?}");
        }
    });
}

#[test]
fn the_score_sums_untempered_processed_log_probabilities() {
    let model = Model::random(small(), 12).unwrap();
    let config = model.config().clone();
    let masked = |row: &mut [f32]| {
        for t in [3usize, 9, 20] {
            row[t] = NEG;
        }
    };
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).unwrap();
        session.encode(&SRC).unwrap();
        let options = SearchOptions {
            length_penalty: 0.0,
            ..SearchOptions::sample(Sampling::temperature(2.0, 9), 9)
        };
        let bos = config.bos_id;
        let hyps = session
            .generate(
                Request::new(options)
                    .prefix(&[bos])
                    .process(|step| masked(step.row_mut(0))),
            )
            .unwrap();
        let best = hyps.best().unwrap();
        let (tokens, score) = (best.tokens.to_vec(), best.score);
        assert!(tokens.iter().all(|t| ![3, 9, 20].contains(t)));
        // Teacher-force the drawn tokens and sum their log-probabilities after the mask.
        session.encode(&SRC).unwrap();
        let mut input = bos;
        let mut want = 0.0f64;
        for &t in &tokens {
            let mut row = session.decode_step(&[input]).unwrap().to_vec();
            masked(&mut row);
            log_softmax(isa, &mut row);
            want += row[t as usize] as f64;
            input = t;
        }
        let tol = 1e-4 * tokens.len() as f64 * want.abs().max(1.0);
        assert!(
            (score as f64 - want).abs() < tol,
            "{score} vs {want} over {tokens:?}"
        );
    });
}

#[test]
fn bad_sampling_options_are_refused() {
    let model = Model::random(small(), 13).unwrap();
    let mut session = Session::new(&model, tessel_kernels::Isa::best()).unwrap();
    session.encode(&SRC).unwrap();
    let bad = [
        SearchOptions {
            beam: 2,
            ..SearchOptions::sample(Sampling::temperature(1.0, 0), 4)
        },
        SearchOptions::sample(Sampling::temperature(-1.0, 0), 4),
        SearchOptions::sample(Sampling::temperature(f32::NAN, 0), 4),
        SearchOptions::sample(
            Sampling {
                top_p: 0.0,
                ..Sampling::temperature(1.0, 0)
            },
            4,
        ),
        SearchOptions::sample(
            Sampling {
                top_p: 1.5,
                ..Sampling::temperature(1.0, 0)
            },
            4,
        ),
    ];
    for options in bad {
        assert!(
            matches!(
                session.generate(Request::new(options)),
                Err(RunError::BadOption(_))
            ),
            "{options:?}"
        );
    }
}
