//! The forced pass that reports cross-attention probabilities (`Session::align`): its logits
//! are the ones a prefill of the same tokens gives, each reported head's rows are
//! probabilities, it is refused without planned room, and nothing allocates in it.

use tessel_model::{
    Config, FfnActivation, Limits, Model, NormPlacement, Positions, RunError, Session,
};
use tessel_tests::counting::{allocations, ThreadCounting};
use tessel_tests::for_each_isa;

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

fn config() -> Config {
    Config {
        d_model: 48,
        heads: 3,
        encoder_layers: 2,
        decoder_layers: 2,
        d_ff: 80,
        src_vocab: 53,
        tgt_vocab: 59,
        max_src_len: 20,
        max_tgt_len: 16,
        max_beam: 2,
        norm: NormPlacement::Pre,
        activation: FfnActivation::Gelu,
        positions: Positions::Sinusoidal,
        ..Config::transformer_base()
    }
}

const SRC: [u32; 17] = [5, 9, 3, 44, 12, 7, 7, 30, 2, 18, 25, 1, 40, 11, 6, 50, 8];
const TGT: [u32; 9] = [1, 4, 22, 8, 8, 31, 2, 57, 13];
const HEADS: [(usize, usize); 3] = [(1, 0), (1, 2), (0, 1)];

#[test]
fn the_forced_pass_gives_prefill_logits_and_probabilities() {
    let model = Model::random(config(), 11).expect("model");
    let vocab = model.config().tgt_vocab;
    for_each_isa(|isa| {
        let limits = Limits::of(model.config());
        let mut session = Session::with_alignment(&model, isa, limits, 3).expect("session");
        session.encode(&SRC).expect("encode");
        let mut prefilled = Vec::new();
        for len in 1..=TGT.len() {
            session.reset_decoder();
            prefilled.push(session.prefill(&TGT[..len]).expect("prefill").to_vec());
        }
        let mut rows = vec![Vec::new(); TGT.len()];
        let frames = 13;
        let probs = session
            .align(&TGT, &HEADS, frames, |first, logits| {
                for (i, row) in logits.chunks(vocab).enumerate() {
                    rows[first + i] = row.to_vec();
                }
            })
            .expect("align")
            .to_vec();
        assert_eq!(probs.len(), HEADS.len() * TGT.len() * frames);
        for (got, want) in rows.iter().zip(&prefilled) {
            assert_eq!(got.len(), vocab);
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{isa:?}: {g} vs {w}"
                );
            }
        }
        for row in probs.chunks(frames) {
            let sum: f32 = row.iter().sum();
            assert!((sum - 1.0).abs() < 1e-5 && row.iter().all(|&p| p > 0.0));
        }
        // Heads differ, so their rows do.
        assert_ne!(probs[..frames], probs[TGT.len() * frames..][..frames]);
        // The cache holds the forced tokens: the next step continues them as a prefill does.
        let next = session.decode_step(&[3]).expect("step").to_vec();
        session.reset_decoder();
        let mut all = TGT.to_vec();
        all.push(3);
        let want = session.prefill(&all).expect("prefill");
        for (g, w) in next.iter().zip(want) {
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0));
        }
    });
}

#[test]
fn the_forced_pass_is_refused_without_room_and_allocates_nothing() {
    let model = Model::random(config(), 11).expect("model");
    let limits = Limits::of(model.config());
    let mut plain = Session::new(&model, tessel_kernels::Isa::best()).expect("session");
    plain.encode(&SRC).expect("encode");
    assert!(plain.plan().region("align_probs").is_none());
    assert!(matches!(
        plain.align(&TGT, &HEADS, 5, |_, _| {}),
        Err(RunError::BadOption(_))
    ));
    for_each_isa(|isa| {
        let mut session = Session::with_alignment(&model, isa, limits, 3).expect("session");
        let region = session.plan().region("align_probs").expect("planned");
        assert_eq!(region.bytes, 3 * 16 * 20 * 4);
        let mut seen = 0.0f32;
        let n = allocations(|| {
            assert_eq!(
                session.align(&TGT, &HEADS, 5, |_, _| {}),
                Err(RunError::NotEncoded)
            );
            session.encode(&SRC).expect("encode");
            let probs = session
                .align(&TGT, &HEADS, 17, |_, logits| seen += logits[0])
                .expect("align");
            seen += probs[0];
            let four = [(0, 0); 4];
            assert!(session.align(&TGT, &four, 5, |_, _| {}).is_err());
            assert!(session.align(&TGT, &[(2, 0)], 5, |_, _| {}).is_err());
            assert!(session.align(&TGT, &HEADS, 18, |_, _| {}).is_err());
            assert!(session.align(&[], &HEADS, 5, |_, _| {}).is_err());
            assert!(session.align(&[0; 17], &HEADS, 5, |_, _| {}).is_err());
            assert!(session.align(&[59], &HEADS, 5, |_, _| {}).is_err());
        });
        assert_eq!(n, 0, "{isa:?}");
        assert!(seen.is_finite());
    });
}
