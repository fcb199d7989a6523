//! Proves that nothing allocates after `Session::new` (encode, greedy search, beam search,
//! sampling, single steps, beam reordering and refused calls) or after `Batch::new` (encodes
//! into slots, a batched search, its hypotheses; with a Whisper model, audio encoded into
//! slots, a slot's prefill and its alignment pass), counted by a global allocator that counts the
//! allocations of the measuring thread only (the test harness's threads do not interfere).

use tessel_model::{
    Batch, Config, Convention, DecodeOptions, EarlyStopping, FfnActivation, LoadOptions, Model,
    NormPlacement, Positions, Request, Sampling, SearchOptions, Session, WeightType,
};
use tessel_tests::counting::{allocations, ThreadCounting};
use tessel_tests::for_each_isa;

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

fn config(norm: NormPlacement) -> Config {
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
        max_beam: 4,
        norm,
        activation: FfnActivation::Gelu,
        positions: Positions::Sinusoidal,
        ..Config::transformer_base()
    }
}

#[test]
fn the_counter_sees_allocations() {
    let n = allocations(|| {
        let v = vec![1u8; 100];
        std::hint::black_box(&v);
    });
    assert!(n >= 1);
}

#[test]
fn nothing_allocates_after_session_creation() {
    let cases = [
        (NormPlacement::Post, WeightType::F32),
        (NormPlacement::Pre, WeightType::F32),
        (NormPlacement::Pre, WeightType::F16),
        (NormPlacement::Post, WeightType::Bf16),
        (NormPlacement::Post, WeightType::Bf16Dot),
        (NormPlacement::Pre, WeightType::Int8),
        (NormPlacement::Post, WeightType::Int8),
    ];
    // Decoding options under both conventions and every early stopping rule, with forced
    // tokens and processors (built before counting: they own their token lists).
    let mut decoded = Vec::new();
    for (convention, early_stopping) in [
        (Convention::CTranslate2, EarlyStopping::Heuristic),
        (Convention::Transformers, EarlyStopping::WhenFull),
        (Convention::Transformers, EarlyStopping::Heuristic),
        (Convention::Transformers, EarlyStopping::Never),
    ] {
        let mut o = DecodeOptions::beam(4, 10);
        o.num_hypotheses = 3;
        o.forced_bos = Some(5);
        o.prefix = vec![6];
        o.repetition_penalty = 1.3;
        o.no_repeat_ngram_size = 2;
        o.search.length_penalty = 1.5;
        o.convention = convention;
        o.early_stopping = early_stopping;
        decoded.push(o);
    }
    for (norm, weights) in cases {
        let model =
            Model::random_with(config(norm), 7, &LoadOptions::weights(weights)).expect("model");
        for_each_isa(|isa| {
            let mut session = Session::new(&model, isa).expect("session");
            let src: [u32; 17] = [5, 9, 3, 44, 12, 7, 7, 30, 2, 18, 25, 1, 40, 11, 6, 50, 8];
            let mut seen = 0usize;
            let mut checksum = 0.0f32;
            let count = allocations(|| {
                session.encode(&src).expect("encode");
                let greedy = SearchOptions {
                    stop_at_eos: false,
                    ..SearchOptions::greedy(16)
                };
                let hyps = session
                    .generate(Request::new(greedy).on_step(|view| {
                        seen += 1;
                        checksum += view.logits[0];
                    }))
                    .expect("greedy");
                assert_eq!(hyps.best().map(|h| h.tokens.len()), Some(16));
                session.encode(&src[..9]).expect("encode again");
                let beam = SearchOptions {
                    length_penalty: 0.6,
                    ..SearchOptions::beam(4, 16)
                };
                let hyps = session
                    .generate(Request::new(beam).on_step(|_| seen += 1))
                    .expect("beam");
                assert!(!hyps.is_empty());
                let sampled = SearchOptions::sample(Sampling::temperature(0.7, 3), 12);
                let hyps = session
                    .generate(Request::new(sampled).on_step(|_| seen += 1))
                    .expect("sampling");
                assert!(!hyps.is_empty());
                let nucleus = Sampling {
                    top_k: 5,
                    top_p: 0.9,
                    ..Sampling::temperature(1.0, 4)
                };
                let hyps = session
                    .generate(
                        Request::new(SearchOptions::sample(nucleus, 12)).on_step(|_| seen += 1),
                    )
                    .expect("top-k, top-p");
                assert!(!hyps.is_empty());
                session.reset_decoder();
                session.decode_step(&[1]).expect("step");
                session.reorder_beams(&[0, 0, 0]).expect("reorder");
                session.decode_step(&[3, 4, 5]).expect("step");
                session.reorder_beams(&[2, 0]).expect("reorder");
                assert!(session.decode_step(&[1, 2, 3]).is_err());
                session.encode(&src).expect("encode");
                session.prefill(&[1, 5, 9, 4, 4, 7]).expect("prefill");
                session.decode_step(&[3]).expect("step after prefill");
                let hyps = session
                    .generate(Request::new(SearchOptions::beam(3, 6)).prefix(&[1, 9, 4]))
                    .expect("beam from a prefix");
                assert!(!hyps.is_empty());
                for options in &decoded {
                    let request = options.request(&session).expect("a request");
                    let hyps = session.generate(request).expect("decoded");
                    assert!(hyps.len() >= options.num_hypotheses);
                }
                assert!(session.encode(&[999]).is_err());
                assert!(session
                    .generate(Request::new(SearchOptions::beam(9, 4)))
                    .is_err());
            });
            assert!(seen > 16 && checksum.is_finite());
            assert_eq!(
                count, 0,
                "{norm:?} {isa}: heap allocations during inference"
            );
        });
    }
}

#[test]
fn nothing_allocates_after_batch_creation() {
    for weights in [WeightType::F32, WeightType::Int8] {
        let model = Model::random_with(
            config(NormPlacement::Pre),
            7,
            &LoadOptions::weights(weights),
        )
        .expect("model");
        for_each_isa(|isa| {
            let limits = tessel_model::Limits::of(model.config()).with_batch(5);
            let mut batch = Batch::new(&model, isa, limits).expect("batch");
            let src: [u32; 17] = [5, 9, 3, 44, 12, 7, 7, 30, 2, 18, 25, 1, 40, 11, 6, 50, 8];
            let searches = [
                SearchOptions::beam(4, 16),
                SearchOptions::greedy(9),
                SearchOptions::beam(2, 5),
                SearchOptions::sample(Sampling::temperature(0.7, 3), 12),
            ];
            let mut requests = searches.map(Request::new);
            let mut found = 0;
            let count = allocations(|| {
                for slot in 0..searches.len() {
                    batch.encode(slot, &src[..8 + 2 * slot]).expect("encode");
                }
                batch.generate(&mut requests).expect("batched search");
                for slot in 0..searches.len() {
                    found += batch.hypotheses(slot).expect("hypotheses").len();
                }
                assert!(batch.encode(9, &src).is_err());
            });
            assert!(found >= searches.len());
            assert_eq!(count, 0, "{weights:?} {isa}: heap allocations in a batch");
        });
    }
}

/// A batch of Whisper slots (the `tests/transcribe/tiny_en_32` fixture): audio encoded into
/// slots, a slot's prefill, a batched search and a slot's alignment pass.
#[test]
fn nothing_allocates_in_an_audio_batch() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("transcribe/tiny_en_32/model");
    let options = tessel_model::load::ct2::Ct2Options {
        max_beam: 2,
        ..Default::default()
    };
    let model = tessel_model::load::ct2::load_dir(&dir, options)
        .expect("tiny_en_32")
        .model;
    let n_mels = model.config().front_end.n_mels().expect("Whisper");
    let mel: Vec<f32> = (0..n_mels * 3000)
        .map(|i| ((i % 97) as f32 - 48.0) / 64.0)
        .collect();
    let heads = [(1, 0), (1, 1)];
    for_each_isa(|isa| {
        let limits = tessel_model::Limits::of(model.config()).with_batch(2);
        let mut batch = Batch::with_alignment(&model, isa, limits, heads.len()).expect("batch");
        let start = [model.config().bos_id];
        let mut requests = [SearchOptions::beam(2, 6), SearchOptions::greedy(6)]
            .map(|search| Request::new(search).prefix(&start));
        let mut rows = 0;
        let count = allocations(|| {
            batch.encode_audio(0, &mel).expect("encode slot 0");
            batch
                .encode_audio(1, &mel[..n_mels * 1200])
                .expect("encode slot 1");
            batch.prefill(1, &[start[0], 7, 9]).expect("prefill");
            batch.generate(&mut requests).expect("batched search");
            let probs = batch.align(0, &[start[0], 7, 9], &heads, 700, |_, logits| {
                rows += logits.len();
            });
            assert_eq!(probs.expect("align").len(), heads.len() * 3 * 700);
            assert!(batch.encode_audio(2, &mel).is_err());
        });
        assert!(rows > 0);
        assert_eq!(count, 0, "{isa}: heap allocations in an audio batch");
    });
}

/// A Longformer encoder (the LED fixture of `tests/translation/led`): its windows, global
/// tokens and global projections run in the arena too.
#[test]
fn nothing_allocates_in_a_longformer_encoder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("translation/led/hf");
    let model = tessel_model::load::hf::led::load_hf_dir(&dir, 4, &LoadOptions::default())
        .expect("LED fixture");
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).expect("session");
        let src: Vec<u32> = (0..40).map(|i| 4 + (i * 37) % 250).collect();
        let count = allocations(|| {
            for global in [1, 0, 3, 100] {
                session.set_global_tokens(global);
                session.encode(&src).expect("encode");
                let hyps = session
                    .generate(Request::new(SearchOptions::beam(4, 8)).prefix(&[2, 0]))
                    .expect("beam");
                assert!(!hyps.is_empty());
            }
        });
        assert_eq!(count, 0, "{isa}: heap allocations in an LED session");
    });
}

/// A LongT5 transient-global encoder (the fixture of `tests/translation/longt5_tglobal`): its
/// block aggregates, side rows and side bias run in the arena too, alone and batched, for
/// sources with and without side keys.
#[test]
fn nothing_allocates_in_a_transient_global_encoder() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("translation/longt5_tglobal/hf");
    let model = tessel_model::load::hf::longt5::load_hf_dir(&dir, 16, 4, &LoadOptions::default())
        .expect("LongT5 transient-global fixture");
    let limits = tessel_model::Limits::of(model.config())
        .with_batch(2)
        .with_encode_sources(2);
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).expect("session");
        let mut batch = Batch::new(&model, isa, limits).expect("batch");
        let long: Vec<u32> = (0..41).map(|i| 3 + (i * 37) % 240).collect();
        let count = allocations(|| {
            for len in [41, 3, 1, 8] {
                session.encode(&long[..len]).expect("encode");
                let hyps = session
                    .generate(Request::new(SearchOptions::beam(4, 8)).prefix(&[0]))
                    .expect("beam");
                assert!(!hyps.is_empty());
            }
            batch
                .encode_all(&[(0, &long[..]), (1, &long[..3])])
                .expect("batch encode");
            batch.prefill(1, &[0, 5]).expect("prefill");
        });
        assert_eq!(
            count, 0,
            "{isa}: heap allocations in a LongT5 transient-global session"
        );
    });
}
