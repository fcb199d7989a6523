//! `Generation::from_json` on arbitrary text, then a search with the options it accepts on a
//! tiny random model: a typed `GenerationError` or `RunError`, never a panic, whatever the
//! token ids, lengths, penalties, n-gram sizes and early stopping the file holds, under both
//! conventions' beam search rules.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessel_kernels::Isa;
use tessel_model::{Config, Convention, Generation, Model, Session};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(generation) = Generation::from_json(text) else {
        return;
    };
    let config = Config {
        d_model: 16,
        heads: 2,
        encoder_layers: 1,
        decoder_layers: 1,
        d_ff: 32,
        src_vocab: 40,
        tgt_vocab: 40,
        max_src_len: 8,
        max_tgt_len: 12,
        max_beam: 3,
        ..Config::transformer_base()
    };
    let model = Model::random(config, 3).expect("a valid config");
    let mut session = Session::new(&model, Isa::best()).expect("a session");
    session.encode(&[3, 4, 5]).expect("encode");
    let mut options = generation.options;
    options.max_new_tokens = Some(options.max_new_tokens.unwrap_or(8).min(12));
    for convention in [Convention::Transformers, Convention::CTranslate2] {
        options.convention = convention;
        let hyps = match options.request(&session) {
            Ok(request) => session.generate(request),
            Err(e) => Err(e),
        };
        if let Ok(hyps) = hyps {
            assert!(hyps.len() <= options.search.beam);
            for h in hyps.iter() {
                assert!(h.tokens.len() <= 12);
                assert!(h.tokens.iter().all(|&t| t < 40));
            }
        }
    }
});
