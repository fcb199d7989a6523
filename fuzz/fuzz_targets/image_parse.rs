//! The packed model image reader (`tessel_model::load::image::parse`) on arbitrary bytes, and
//! on a valid image of a tiny random model with fuzzer-chosen bytes flipped or cut off: every parse
//! is `Ok` or a typed `ImageError`; a model that parses repacks into an image that parses and
//! repacks to itself, and runs (or refuses with a typed error) an encode and a decoder step
//! within small limits. Never a panic.
#![no_main]

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tessel_kernels::Isa;
use tessel_model::aligned::AlignedBuf;
use tessel_model::config::Config;
use tessel_model::layers::Block;
use tessel_model::load::image;
use tessel_model::{Limits, Model, Session};

/// The image of a tiny random model (2 + 2 blocks, every optional tensor a config can have).
fn valid() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let config = Config {
            d_model: 8,
            heads: 2,
            encoder_layers: 2,
            decoder_layers: 2,
            d_ff: 16,
            src_vocab: 11,
            tgt_vocab: 13,
            max_src_len: 6,
            max_tgt_len: 6,
            max_beam: 2,
            ..Config::transformer_base()
        };
        Model::random(config, 5)
            .expect("a tiny model")
            .pack()
            .expect("it packs")
    })
}

fuzz_target!(|data: &[u8]| {
    let bytes: Vec<u8> = match data.split_first() {
        // Raw bytes.
        Some((0, rest)) => rest.to_vec(),
        // The valid image with (position, xor) edits, then cut at the last two bytes' length.
        Some((_, rest)) => {
            let mut image = valid().to_vec();
            let (edits, cut) = rest.split_at(rest.len() - rest.len() % 4);
            for edit in edits.chunks_exact(4) {
                let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % image.len();
                image[at] ^= edit[2];
            }
            if let [a, b] = cut[..cut.len().min(2)] {
                image.truncate(usize::from(u16::from_le_bytes([a, b])));
            }
            image
        }
        None => return,
    };
    let aligned = AlignedBuf::from_slice(&bytes).expect("small input");
    let mut slots: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    slots.resize_with(8, MaybeUninit::uninit);
    let Ok(model) = image::parse(aligned.as_slice(), &mut slots) else {
        return;
    };
    let repacked = model.pack().expect("a parsed model packs");
    let again = AlignedBuf::from_slice(&repacked).expect("small input");
    let mut slots_again: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    slots_again.resize_with(8, MaybeUninit::uninit);
    let reparsed =
        image::parse(again.as_slice(), &mut slots_again).expect("a repacked image parses");
    assert_eq!(reparsed.pack().expect("it packs"), repacked);
    // Small limits: a flipped byte can make the config's maximum lengths or beam plan an arena
    // of gigabytes, all of which a session makes resident when it is created.
    let config = model.config();
    let limits = Limits {
        max_src_len: config.max_src_len.min(8),
        max_tgt_len: config.max_tgt_len.min(8),
        max_beam: config.max_beam.min(2),
        max_batch: 1,
        encode_sources: 1,
        ..Limits::of(config)
    };
    let Ok(mut session) = Session::with_limits(&model, Isa::best(), limits) else {
        return;
    };
    if session.encode(&[1, 2, 3]).is_ok() {
        let _ = session.decode_step(&[model.config().bos_id]);
    }
});
