//! The packed model image (`tessel_model::load::image`): a model packed and parsed back (borrowing
//! the image's bytes, or loaded as an owned copy) computes bit-identical logits to the model it
//! was packed from, for the numbers model, a Whisper fixture and a T5 fixture (relative bias,
//! RMSNorm, gated feed-forward) in every weight type; malformed images are typed errors.

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tessel_kernels::Isa;
use tessel_model::aligned::AlignedBuf;
use tessel_model::layers::Block;
use tessel_model::layers::PackedWeight;
use tessel_model::load::hf::{bart, t5, whisper};
use tessel_model::load::image::{self, ImageError};
use tessel_model::session::buffer_bytes;
use tessel_model::storage::Weights;
use tessel_model::{
    ArenaPlan, Config, Limits, LoadOptions, Model, Request, SearchOptions, Session, SessionError,
    WeightType,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The image's bytes in 64-byte aligned memory (as `include_bytes!` into `image::Aligned`).
struct AlignedBytes(AlignedBuf<u8>);

impl AlignedBytes {
    fn new(bytes: &[u8]) -> AlignedBytes {
        AlignedBytes(AlignedBuf::from_slice(bytes).unwrap())
    }

    fn bytes(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// Logits of a teacher-forced run: encode, then `steps` decoder steps feeding fixed tokens.
fn logits(model: &Model<'_>, isa: Isa, input: &Input) -> Vec<u32> {
    let mut session = Session::new(model, isa).unwrap();
    match input {
        Input::Tokens(src) => session.encode(src).unwrap(),
        Input::Mel(mel) => session.encode_audio(mel).unwrap(),
    }
    let mut bits = Vec::new();
    let mut token = model.config().bos_id;
    let vocab = model.config().tgt_vocab as u32;
    for step in 0..4u32 {
        let logits = session.decode_step(&[token]).unwrap();
        bits.extend(logits.iter().map(|v| v.to_bits()));
        token = (token * 7 + 3 + step) % vocab;
    }
    bits
}

enum Input {
    Tokens(Vec<u32>),
    Mel(Vec<f32>),
}

fn input(model: &Model<'_>) -> Input {
    let config = model.config();
    match config.front_end.n_mels() {
        Some(n_mels) => {
            let frames = 2 * config.max_src_len.min(8);
            Input::Mel(
                (0..n_mels * frames)
                    .map(|i| ((i * 37 % 101) as f32 / 50.0 - 1.0) * 0.7)
                    .collect(),
            )
        }
        None => Input::Tokens(
            (0..config.max_src_len.min(9))
                .map(|i| (i as u32 * 5 + 3) % config.src_vocab as u32)
                .collect(),
        ),
    }
}

/// Packs `model`, parses the image in place and loads it as an owned copy; both give the
/// original's logits bit for bit, and packing the parsed model gives the same image.
fn round_trip(what: &str, model: &Model<'_>, isas: &[Isa]) {
    let packed = model.pack().unwrap();
    let aligned = AlignedBytes::new(&packed);
    let needed = image::blocks_needed(aligned.bytes()).unwrap();
    let mut slots: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    slots.resize_with(needed, MaybeUninit::uninit);
    let borrowed = image::parse(aligned.bytes(), &mut slots).unwrap();
    assert_eq!(borrowed.config(), model.config(), "{what}");
    assert_eq!(borrowed.weight_bytes(), model.weight_bytes(), "{what}");
    assert_eq!(borrowed.pack().unwrap(), packed, "{what}: repacking");
    let owned = image::to_owned(&borrowed).unwrap();
    let input = input(model);
    for &isa in isas {
        let expected = logits(model, isa, &input);
        assert_eq!(
            logits(&borrowed, isa, &input),
            expected,
            "{what} at {isa:?}"
        );
        assert_eq!(
            logits(&owned, isa, &input),
            expected,
            "{what} owned at {isa:?}"
        );
    }
}

const TYPES: [WeightType; 4] = [
    WeightType::F32,
    WeightType::F16,
    WeightType::Bf16,
    WeightType::Bf16Dot,
];

/// A model whose packed weights are each under 2 MiB (and together over it) gathers them in
/// its weight pool when built (on Linux, where buffers get huge pages); the pooled model
/// computes the logits of its image (weights borrowed, not pooled) bit for bit.
#[test]
fn pooled_weights_compute_what_their_image_computes() {
    let config = Config {
        d_model: 256,
        heads: 4,
        d_ff: 1024,
        encoder_layers: 2,
        decoder_layers: 2,
        src_vocab: 1000,
        tgt_vocab: 1000,
        max_src_len: 16,
        max_tgt_len: 8,
        ..Config::transformer_base()
    };
    let levels = tessel_tests::isa_levels();
    for weights in [WeightType::F32, WeightType::Bf16Dot, WeightType::Int8] {
        let model = Model::random_with(config.clone(), 3, &LoadOptions::weights(weights)).unwrap();
        let pooled = match model.generator().weight() {
            PackedWeight::F32(b) => matches!(b.storage(), Weights::Pooled(_)),
            PackedWeight::Bf16(b) => matches!(b.storage(), Weights::Pooled(_)),
            PackedWeight::I8(b) => matches!(b.storage(), Weights::Pooled(_)),
            PackedWeight::F16(b) => matches!(b.storage(), Weights::Pooled(_)),
        };
        assert_eq!(pooled, cfg!(target_os = "linux"), "{weights}");
        round_trip(&format!("pooled {weights}"), &model, &levels);
    }
}

#[test]
fn numbers_model_round_trips_bit_identical_at_every_level() {
    let dir = root().join("assets").join("numbers");
    let levels = tessel_tests::isa_levels();
    for weights in TYPES {
        let model = Model::load_dir_with(&dir, &LoadOptions::weights(weights)).unwrap();
        round_trip(&format!("numbers {weights}"), &model, &levels);
    }
    // As stored (f16), through a file.
    let model = Model::load_dir(&dir).unwrap();
    let path = std::env::temp_dir().join(format!("tessel-image-{}.tessel", std::process::id()));
    std::fs::write(&path, model.pack().unwrap()).unwrap();
    let loaded = image::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let input = input(&model);
    assert_eq!(
        logits(&loaded, Isa::best(), &input),
        logits(&model, Isa::best(), &input)
    );
}

#[test]
fn whisper_fixture_round_trips_bit_identical() {
    let dir = root().join("tests/whisper/tiny_like_80/hf");
    for weights in TYPES {
        let model = whisper::load_hf_dir(&dir, 2, &LoadOptions::weights(weights)).unwrap();
        round_trip(&format!("whisper {weights}"), &model, &[Isa::best()]);
    }
}

#[test]
fn t5_fixtures_round_trip_bit_identical() {
    for name in ["t5", "t5_tied", "t5_v1_1"] {
        let dir = root().join("tests/translation").join(name).join("hf");
        for weights in TYPES {
            let model = t5::load_hf_dir(&dir, 32, 2, &LoadOptions::weights(weights)).unwrap();
            round_trip(&format!("{name} {weights}"), &model, &[Isa::best()]);
        }
    }
}

/// A model whose stacks differ in heads and feed-forward width (`bart_stacks`) keeps each
/// stack's in its image (config words 26 and 27).
#[test]
fn bart_stacks_fixture_round_trips_bit_identical() {
    let dir = root().join("tests/translation/bart_stacks/hf");
    let (_, model) = bart::load_hf_dir(&dir, 2, &LoadOptions::default()).unwrap();
    assert!(model.config().decoder_heads.is_some() && model.config().decoder_d_ff.is_some());
    round_trip("bart_stacks", &model, &tessel_tests::isa_levels());
}

fn numbers_image() -> &'static [u8] {
    use std::sync::OnceLock;
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let dir = root().join("assets").join("numbers");
        Model::load_dir(&dir).unwrap().pack().unwrap()
    })
}

/// Parses `bytes` (copied to aligned memory); the outcome's error, if any.
fn parse_error(bytes: &[u8]) -> Option<ImageError> {
    let aligned = AlignedBytes::new(bytes);
    let mut slots: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    slots.resize_with(64, MaybeUninit::uninit);
    image::parse(aligned.bytes(), &mut slots).err()
}

#[test]
fn malformed_images_are_typed_errors() {
    let image = numbers_image();
    assert_eq!(parse_error(image), None);
    assert!(matches!(
        parse_error(&image[..10]),
        Some(ImageError::Truncated { .. })
    ));
    assert!(matches!(
        parse_error(&image[..image.len() - 1]),
        Some(ImageError::Truncated { .. })
    ));
    let mut bad = image.to_vec();
    bad[0] ^= 1;
    assert_eq!(parse_error(&bad), Some(ImageError::BadMagic));
    let mut bad = image.to_vec();
    bad[12..16].copy_from_slice(&0x0102_0304u32.to_be_bytes());
    assert_eq!(parse_error(&bad), Some(ImageError::ByteOrder));
    let mut bad = image.to_vec();
    bad.push(0);
    assert!(matches!(parse_error(&bad), Some(ImageError::Header(_))));
    // Too few block slots, and a buffer off the 64-byte boundary.
    let aligned = AlignedBytes::new(image);
    let mut slots: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    slots.resize_with(1, MaybeUninit::uninit);
    assert!(matches!(
        image::parse(aligned.bytes(), &mut slots),
        Err(ImageError::BlockStorage { .. })
    ));
    let mut shifted = vec![0u8; image.len() + 128];
    let skew = (64 - shifted.as_ptr() as usize % 64) % 64 + 4;
    shifted[skew..skew + image.len()].copy_from_slice(image);
    let mut slots: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    slots.resize_with(64, MaybeUninit::uninit);
    assert_eq!(
        image::parse(&shifted[skew..skew + image.len()], &mut slots).err(),
        Some(ImageError::Misaligned(64))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any truncation is refused with a typed error.
    #[test]
    fn truncated_images_are_errors(cut in 0usize..1 << 20) {
        let image = numbers_image();
        let cut = cut % image.len();
        prop_assert!(parse_error(&image[..cut]).is_some());
    }

    /// Flipped bytes in the header, config or directory are either refused with a typed error
    /// or (a flip inside a value the format allows) still parse; never a panic. A model that
    /// parses runs (or refuses) a short session without panicking.
    #[test]
    fn corrupted_images_never_panic(flips in prop::collection::vec((0usize..4096, 1u8..=255), 1..4)) {
        let image = numbers_image();
        let mut bad = image.to_vec();
        let meta = 64 + 128 + image::RECORD_BYTES * 200;
        for (at, xor) in flips {
            let at = at % meta.min(bad.len());
            bad[at] ^= xor;
        }
        let aligned = AlignedBytes::new(&bad);
        let mut slots: Vec<MaybeUninit<Block<'_>>> = Vec::new();
        slots.resize_with(64, MaybeUninit::uninit);
        if let Ok(model) = image::parse(aligned.bytes(), &mut slots) {
            if let Ok(mut session) = Session::new(&model, Isa::best()) {
                if session.encode(&[3, 4, 5]).is_ok() {
                    let _ = session.decode_step(&[model.config().bos_id]);
                }
            }
        }
    }
}

/// A session whose arena lives in a host's byte buffer (any alignment) computes what an
/// owning session does; a buffer too small is a typed error.
#[test]
fn a_session_runs_in_a_host_buffer() {
    let dir = root().join("assets").join("numbers");
    let model = Model::load_dir(&dir).unwrap();
    let limits = Limits::of(model.config());
    let plan = ArenaPlan::with_limits(model.config(), limits).unwrap();
    let needed = buffer_bytes(&plan);
    let mut small = vec![0u8; needed - 64];
    assert!(matches!(
        Session::in_buffer(&model, Isa::best(), limits, &mut small),
        Err(SessionError::BufferTooSmall { .. })
    ));
    let src: Vec<u32> = (3..12).collect();
    let mut buffer = vec![0xa5u8; needed + 8];
    for skew in [0, 1, 3, 8] {
        let mut hosted =
            Session::in_buffer(&model, Isa::best(), limits, &mut buffer[skew..]).unwrap();
        let mut owned = Session::new(&model, Isa::best()).unwrap();
        hosted.encode(&src).unwrap();
        owned.encode(&src).unwrap();
        let bos = [model.config().bos_id];
        let a: Vec<u32> = hosted
            .decode_step(&bos)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let b: Vec<u32> = owned
            .decode_step(&bos)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(a, b, "skew {skew}");
        let options = SearchOptions::beam(2, model.config().max_tgt_len);
        let best = |h: tessel_model::Hypotheses<'_>| h.best().map(|h| h.tokens.to_vec());
        let a = best(hosted.generate(Request::new(options)).unwrap());
        let b = best(owned.generate(Request::new(options)).unwrap());
        assert_eq!(a, b, "skew {skew}");
    }
}
