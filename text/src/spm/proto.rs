//! The parts of SentencePiece's `ModelProto` (sentencepiece_model.proto, proto2) that encoding
//! and decoding read, as `prost` messages. Fields not listed here are skipped by the decoder,
//! so models written by any sentencepiece version load.

/// `ModelProto`: the pieces and the trainer and normalizer settings of a `.model`/`.spm` file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// The vocabulary in id order.
    #[prost(message, repeated, tag = "1")]
    pub pieces: Vec<Piece>,
    /// How the model was trained (model type, byte fallback, unknown surface).
    #[prost(message, optional, tag = "2")]
    pub trainer_spec: Option<TrainerSpec>,
    /// How text is normalized before segmentation.
    #[prost(message, optional, tag = "3")]
    pub normalizer_spec: Option<NormalizerSpec>,
}

/// `ModelProto.SentencePiece`: one vocabulary entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Piece {
    /// The piece's text (`▁` for a space).
    #[prost(string, optional, tag = "1")]
    pub piece: Option<String>,
    /// Its score: a log probability (unigram) or the negated merge order (BPE).
    #[prost(float, optional, tag = "2")]
    pub score: Option<f32>,
    /// Its type, a [`PieceType`] value (default normal).
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
}

/// `ModelProto.SentencePiece.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceType {
    /// A piece segmentation may produce.
    Normal,
    /// The unknown piece.
    Unknown,
    /// A control symbol (`<s>`, `</s>`, `<pad>`): never produced from text, decodes to nothing.
    Control,
    /// A symbol the user declared: matched as a whole.
    UserDefined,
    /// A piece reserved but not used by segmentation.
    Unused,
    /// One byte `<0xXX>` of the byte fallback.
    Byte,
}

impl PieceType {
    /// The type for a proto enum value; `None` for a value the format does not define.
    pub fn from_proto(value: Option<i32>) -> Option<Self> {
        Some(match value.unwrap_or(1) {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => return None,
        })
    }
}

/// `TrainerSpec`: the fields that change encoding or decoding.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrainerSpec {
    /// 1 unigram, 2 BPE, 3 word, 4 char (default unigram).
    #[prost(int32, optional, tag = "3")]
    pub model_type: Option<i32>,
    /// Whitespace is a suffix of pieces instead of a prefix.
    #[prost(bool, optional, tag = "24")]
    pub treat_whitespace_as_suffix: Option<bool>,
    /// Unknown characters are encoded as their UTF-8 bytes.
    #[prost(bool, optional, tag = "35")]
    pub byte_fallback: Option<bool>,
    /// The text an unknown piece decodes to (default `" ⁇ "`).
    #[prost(string, optional, tag = "44")]
    pub unk_surface: Option<String>,
}

/// `NormalizerSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NormalizerSpec {
    /// The rule set's name (`nmt_nfkc`, `identity`, ...), for messages.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// The compiled character map (a double-array trie and its replacement strings).
    #[prost(bytes = "vec", optional, tag = "2")]
    pub precompiled_charsmap: Option<Vec<u8>>,
    /// Prepend a space to the text (default true).
    #[prost(bool, optional, tag = "3")]
    pub add_dummy_prefix: Option<bool>,
    /// Drop leading and trailing spaces and collapse runs of spaces (default true).
    #[prost(bool, optional, tag = "4")]
    pub remove_extra_whitespaces: Option<bool>,
    /// Replace spaces by `▁` (default true).
    #[prost(bool, optional, tag = "5")]
    pub escape_whitespaces: Option<bool>,
}
