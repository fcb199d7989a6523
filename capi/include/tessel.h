/*
 * tessel.h: the C API of tessel, a CPU inference engine for transformer encoder-decoders.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * Link: -ltessel (libtessel.a or libtessel.so); with the static library also
 * -lpthread -ldl -lm. C99 or later; C++ through tessel.hpp (C++17, RAII).
 *
 * Handles. A tessel_model is immutable and reference-counted: tessel_model_load_* returns it
 * with one reference, tessel_model_retain adds one, tessel_model_release drops one, and each
 * session holds one, so a model may be released while its sessions live. It is loaded from a
 * directory, a packed image file (`tessel pack`), or a packed image in caller memory that
 * tessel_model_load_memory reads in place: those bytes must outlive the model. A
 * tessel_session is one model's working state: its arena is allocated once by
 * tessel_session_new and freed by tessel_session_free, or placed by
 * tessel_session_new_in_buffer in a caller buffer of tessel_session_arena_bytes bytes that
 * must outlive the session. A tessel_batch (tessel_batch_new, tessel_batch_free) is a session
 * for up to max_batch sequences decoded together, each in a slot: tessel_batch_encode a
 * source into a free slot and tessel_batch_submit its search at any time, tessel_batch_step
 * runs one step over every running slot at once, tessel_batch_running polls a slot, and
 * tessel_batch_finished / tessel_batch_hypothesis read a finished one. Each slot's result is
 * the one a session gives the same source and options.
 *
 * Ownership. The library owns nothing the caller did not ask it to create, and the caller
 * frees nothing the library allocated except through these calls. Every result goes into a
 * caller-owned buffer; when a buffer is too small the call returns
 * TESSEL_ERR_BUFFER_TOO_SMALL, writes the size it needs, and changes nothing else. Strings the
 * library returns (version, names, tessel_last_error) are static or thread-owned: never free
 * them.
 *
 * Errors. Every function that can fail returns a tessel_status (TESSEL_OK is 0); only the
 * infallible ones (tessel_version, tessel_status_name, tessel_last_error, the *_default
 * constructors) return their value directly. A failing call sets this thread's message,
 * tessel_last_error(); successful calls leave it. No Rust panic crosses this boundary: it is
 * caught and returned as TESSEL_ERR_PANIC. NULL where a pointer is required, a handle of the
 * wrong kind, and out-of-range arguments are errors, not crashes; a refused call leaves the
 * session usable and unchanged. A pointer that was never a handle, or a freed handle, is
 * undefined behaviour, as with free().
 *
 * Task level. A tessel_translator (tessel_translator_load: a translation model directory
 * with its tokenizer and generation config) turns text into text with tessel_translate, and
 * many lines decoded together with tessel_translate_batch; a tessel_transcriber (tessel_transcriber_load: a Whisper directory) turns 16 kHz mono samples
 * or a WAV file into timed segments with tessel_transcribe and tessel_transcribe_wav (and,
 * with word timestamps, timed words: tessel_transcriber_words). Each
 * holds its model and one session, is used by one thread at a time (as a session), and is
 * freed with tessel_translator_free / tessel_transcriber_free. Their outputs go into caller
 * buffers; a call that finds a buffer too small keeps its result, and the retry with the same
 * input copies it instead of running again.
 *
 * Threads. A model may be used from any number of threads at once. A session (or a batch) is
 * used by one thread at a time (it may move between threads); a call that overlaps another call on the
 * same session returns TESSEL_ERR_BUSY instead of racing. Process-wide state: the forced ISA
 * level (tessel_isa_force), read when a session is created.
 *
 * Allocation. Loading a model and creating a session allocate. After tessel_session_new, the
 * token-level calls (tessel_encode, tessel_encode_audio, tessel_decode_step,
 * tessel_reset_decoder, tessel_reorder_beams, tessel_generate and its callback's tessel_step_tokens,
 * tessel_hypothesis, tessel_session_get_limits, tessel_session_isa_name,
 * tessel_model_get_info, tessel_last_error and tessel_last_error_copy), refusals included,
 * allocate nothing: no malloc, no hidden growth (capi/tests/no_alloc.rs counts), whether
 * the arena was allocated or lives in a caller buffer. After tessel_batch_new, the batch
 * calls (tessel_batch_encode, _submit, _step, _running, _finished, _hypothesis,
 * _get_limits, and the step callbacks) allocate nothing either. Loading (tessel_model_load_memory
 * allocates the layers' descriptors, not the weights), creating a session (an in-buffer
 * session allocates its small bookkeeping, not the arena), tessel_session_arena_bytes,
 * tessel_isa_*, the text call (tessel_numbers_read) and the task-level calls (loading a
 * translator or transcriber, tessel_translate, tessel_translate_batch, tessel_transcribe*)
 * may.
 */


#ifndef TESSEL_H
#define TESSEL_H

/* Generated by cbindgen from capi/src/ (capi/tests/suite/header.rs checks it): do not edit. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * The widest beam any call plans for (`tessel_load_options.max_beam`,
 * `tessel_translate_options.beam`, `tessel_transcriber_load`'s `max_beam`); a wider one is
 * `TESSEL_ERR_ARGUMENT` before anything is loaded.
 */
#define TESSEL_MAX_BEAM 128

/**
 * The most threads a session's GEMMs run on (the calling thread included).
 */
#define TESSEL_MAX_THREADS 64

/**
 * The longest source or target any model plans for (`tessel_load_options.max_len`; the
 * engine's `MAX_POSITIONS`).
 */
#define TESSEL_MAX_LEN 65536

/**
 * The most sequences a batch decodes together (`tessel_batch_new`'s `max_batch`).
 */
#define TESSEL_MAX_BATCH 1024

/**
 * Capacity of the last-error buffer, NUL included.
 */
#define MESSAGE_CAPACITY 1024

/**
 * The result of every call that can fail. `TESSEL_OK` is zero; every other value is a failure
 * whose message `tessel_last_error` returns on the same thread.
 */
typedef enum tessel_status {
    /**
     * Success.
     */
    TESSEL_OK = 0,
    /**
     * A required pointer argument was NULL.
     */
    TESSEL_ERR_NULL = 1,
    /**
     * A handle of the wrong kind (a session where a model was expected, or a pointer that is
     * not a live handle of this library and does not look like one).
     */
    TESSEL_ERR_HANDLE = 2,
    /**
     * An argument is out of range (lengths, beam width, ids, limits, names, UTF-8), or the
     * caller's step callback left no finite logit to rank.
     */
    TESSEL_ERR_ARGUMENT = 3,
    /**
     * A caller buffer is too small; the call reported the size it needs and changed nothing
     * else.
     */
    TESSEL_ERR_BUFFER_TOO_SMALL = 4,
    /**
     * A model could not be loaded (missing or malformed files, unsupported format).
     */
    TESSEL_ERR_LOAD = 5,
    /**
     * The session refused the call (decode before encode, too long, bad beam ...), or the
     * model's output could not be used (every logit non-finite without a callback, generated
     * ids its tokenizer lacks); the session keeps its state and stays usable.
     */
    TESSEL_ERR_RUN = 6,
    /**
     * Memory for a model or an arena could not be allocated.
     */
    TESSEL_ERR_OUT_OF_MEMORY = 7,
    /**
     * The model or the CPU lacks what the call needs (a text call on a model without a
     * vocabulary, a directory of the other task given to a task-level loader, an ISA level
     * this CPU does not run).
     */
    TESSEL_ERR_UNSUPPORTED = 8,
    /**
     * Another thread is using this session right now (a session is used by one thread at a
     * time); nothing was done.
     */
    TESSEL_ERR_BUSY = 9,
    /**
     * A bug inside tessel (a Rust panic), caught at the boundary. The handle involved should
     * be released.
     */
    TESSEL_ERR_PANIC = 10,
    /**
     * A caller buffer does not start on the boundary the call needs (a packed image in
     * memory: 64 bytes); nothing was done.
     */
    TESSEL_ERR_MISALIGNED = 11,
} tessel_status;

/**
 * Up to `max_batch` sequences decoded together; used by one thread at a time. Created by
 * `tessel_batch_new`, freed by `tessel_batch_free`.
 */
typedef struct tessel_batch tessel_batch;

/**
 * An immutable model, shared by sessions and threads; created by a `tessel_model_load_*`
 * call, released with `tessel_model_release`.
 */
typedef struct tessel_model tessel_model;

/**
 * One model's working state; used by one thread at a time. Created by `tessel_session_new`,
 * freed by `tessel_session_free`.
 */
typedef struct tessel_session tessel_session;

/**
 * A Whisper model with its tokenizer and one session; used by one thread at a time. Created
 * by `tessel_transcriber_load`, freed by `tessel_transcriber_free`.
 */
typedef struct tessel_transcriber tessel_transcriber;

/**
 * A translation model with its tokenizer and one session; used by one thread at a time.
 * Created by `tessel_translator_load`, freed by `tessel_translator_free`.
 */
typedef struct tessel_translator tessel_translator;

/**
 * How `tessel_model_load_dir` loads. Start from `tessel_load_options_default()`.
 */
typedef struct tessel_load_options {
    /**
     * Widest beam sessions may plan for, where the directory's config does not state it
     * (Hugging Face and CTranslate2 directories): 1..=`TESSEL_MAX_BEAM` (128), else
     * `TESSEL_ERR_ARGUMENT`. Default 4.
     */
    size_t max_beam;
    /**
     * Longest source and target, where the config does not state it (T5, CTranslate2
     * translation models; capped by stored position tables): 1..=`TESSEL_MAX_LEN` (65536),
     * else `TESSEL_ERR_ARGUMENT`. Whisper ignores it: its encoder reads whole 30 s windows
     * (the model's 1500 positions) and its decoder the model's positions. Default 512.
     */
    size_t max_len;
    /**
     * Storage of the linear layers' weights: "f32", "f16", "bf16", "bf16-dot", or NULL to
     * keep the type the files store.
     */
    const char *weights;
} tessel_load_options;

/**
 * What a model is: its sizes, special ids and maxima.
 */
typedef struct tessel_model_info {
    /**
     * Source vocabulary size (valid ids are below it).
     */
    size_t src_vocab;
    /**
     * Target vocabulary size: the length of one row of logits.
     */
    size_t tgt_vocab;
    /**
     * Decoder start id.
     */
    uint32_t bos_id;
    /**
     * End-of-sequence id.
     */
    uint32_t eos_id;
    /**
     * Padding id.
     */
    uint32_t pad_id;
    /**
     * Mel bins per audio frame for models that read audio (`tessel_encode_audio`), 0 for
     * models that read tokens (`tessel_encode`).
     */
    size_t n_mels;
    /**
     * Bytes of weights held in memory.
     */
    size_t weight_bytes;
    /**
     * The model's maximum source length, target positions and beam width.
     */
    size_t max_src_len;
    /**
     * See `max_src_len`.
     */
    size_t max_tgt_len;
    /**
     * See `max_src_len`.
     */
    size_t max_beam;
    /**
     * Whether `tessel_numbers_read` works on this model's sessions (it came with a vocabulary
     * in the numbers model's format).
     */
    bool has_text_vocab;
} tessel_model_info;

/**
 * The sizes a session plans its arena for. A zero field means the model's maximum (one thread
 * for `threads`); a field above the model's maximum (`tessel_model_info`) is
 * `TESSEL_ERR_ARGUMENT`.
 */
typedef struct tessel_limits {
    /**
     * Longest source (tokens, or encoder positions: half the audio frames).
     */
    size_t max_src_len;
    /**
     * Most target positions, the start token included.
     */
    size_t max_tgt_len;
    /**
     * Widest beam.
     */
    size_t max_beam;
    /**
     * Threads each GEMM runs on, the calling thread included (at most `TESSEL_MAX_THREADS`,
     * 64); the workers start with the session.
     */
    size_t threads;
} tessel_limits;

/**
 * What a step callback sees after each decoder step, before the search ranks the
 * continuations.
 */
typedef struct tessel_step {
    /**
     * Step index (0 for the step after the prefix's last token).
     */
    size_t step;
    /**
     * Live hypotheses: rows of `logits`.
     */
    size_t beams;
    /**
     * Target vocabulary size: the length of a row.
     */
    size_t vocab;
    /**
     * The raw logits, `beams × vocab`, row `i` for hypothesis `i`. The callback may change
     * them (set `-INFINITY` to forbid a token); the search ranks what it leaves, and when it
     * leaves no finite candidate (every logit NaN or `-INFINITY`, or a greedy best of
     * `+INFINITY`) `tessel_generate` returns `TESSEL_ERR_ARGUMENT` naming the step.
     */
    float *logits;
    /**
     * Reserved: read a hypothesis's tokens with `tessel_step_tokens`.
     */
    const void *internal;
} tessel_step;

/**
 * Called after each decoder step of `tessel_generate` with the options' `user_data`. The
 * `step` pointer and what it points to are valid only during the call. The callback must not
 * unwind (C++ exceptions, `longjmp`) through tessel; calls on the same session from inside it
 * are refused with `TESSEL_ERR_BUSY`.
 */
typedef void (*tessel_step_callback)(void *user_data, struct tessel_step *step);

/**
 * How `tessel_generate` searches. Start from `tessel_generate_options_default()`.
 */
typedef struct tessel_generate_options {
    /**
     * Beam width, 1 for greedy search (at most the session's `max_beam`). Default 1.
     */
    size_t beam;
    /**
     * Tokens to generate at most; 0 (the default) for as many as the session's target
     * positions allow after the prefix.
     */
    size_t max_steps;
    /**
     * Exponent α of the length normalisation `score / length^α` (0: the raw sum of
     * log-probabilities). Default 1.
     */
    float length_penalty;
    /**
     * Finish a hypothesis at EOS (default true); false runs exactly `max_steps` steps.
     */
    bool stop_at_eos;
    /**
     * Forced start of the target (e.g. BOS then language and task tokens), `prefix_len` ids;
     * NULL with 0 (the default) starts from the model's BOS.
     */
    const uint32_t *prefix;
    /**
     * See `prefix`.
     */
    size_t prefix_len;
    /**
     * Called after every step, or NULL (the default).
     */
    tessel_step_callback on_step;
    /**
     * Passed to `on_step`.
     */
    void *user_data;
} tessel_generate_options;

/**
 * Voice activity detection before transcribing (faster-whisper's `vad_filter` and its
 * `VadOptions`, same defaults). Start from `tessel_transcribe_options_default()`, whose `vad`
 * is off, or from `tessel_transcribe_options_batched()`, whose `vad` is on with the batched
 * pipeline's defaults (speech chunks of at most 30 s, silences from 160 ms). With
 * `tessel_transcribe_options.batch_size` above 0, `enabled` cuts the audio into the chunks
 * the batches decode, and speech chunks longer than 30 s are always split at 30 s
 * (`max_speech_duration_s` is capped at 30).
 */
typedef struct tessel_vad_options {
    /**
     * Transcribe only the speech Silero VAD finds (default false).
     */
    bool enabled;
    /**
     * A 32 ms window is speech when its probability is at least this, in [0, 1] (default 0.5).
     */
    double threshold;
    /**
     * A window below this is silence, in [0, 1]; negative (the default, -1) for
     * `max(threshold - 0.15, 0.01)`.
     */
    double neg_threshold;
    /**
     * Speech chunks this short or shorter are dropped, milliseconds (default 0).
     */
    uint64_t min_speech_duration_ms;
    /**
     * Longer chunks are split, seconds, above 0; `INFINITY` (the default) for no limit.
     */
    double max_speech_duration_s;
    /**
     * Silence that ends a chunk, milliseconds (default 2000).
     */
    uint64_t min_silence_duration_ms;
    /**
     * Padding on each side of a chunk, milliseconds (default 400).
     */
    uint64_t speech_pad_ms;
} tessel_vad_options;

/**
 * How `tessel_transcribe` decodes. Start from `tessel_transcribe_options_default()` (the
 * sequential transcription, faster-whisper's `WhisperModel.transcribe`) or
 * `tessel_transcribe_options_batched()` (faster-whisper's `BatchedInferencePipeline`).
 */
typedef struct tessel_transcribe_options {
    /**
     * Beam width at temperature 0 (1: greedy; at most the transcriber's `max_beam`).
     * Default 5.
     */
    size_t beam;
    /**
     * Timed segments within each window (default true); false gives one segment per window.
     */
    bool timestamps;
    /**
     * Prompt each window with the text so far (default true). Not read with `batch_size`
     * above 0 (the batched pipeline never conditions on earlier text).
     */
    bool condition_on_previous_text;
    /**
     * Translate to English instead of transcribing (multilingual models). Default false.
     */
    bool translate;
    /**
     * Spoken language (code or English name, one of Whisper's 100), or NULL (the default)
     * to detect it on multilingual models. An unknown code, a language the vocabulary lacks,
     * or any language but English on an English-only model is `TESSEL_ERR_ARGUMENT`.
     */
    const char *language;
    /**
     * Text to condition the first window on, or NULL (the default). With `batch_size` above
     * 0 every chunk is prompted with it (encoded as given, without a leading space, as
     * faster-whisper's batched pipeline does).
     */
    const char *initial_prompt;
    /**
     * Voice activity detection first (default off): only the speech is transcribed, and
     * the segments' times are the original audio's. With `batch_size` above 0, `enabled` is
     * faster-whisper's batched `vad_filter`: the speech found is packed into the chunks of
     * up to 30 s the batches decode (`max_speech_duration_s` capped at 30); off, the audio
     * must be shorter than 30 s (one chunk), else `TESSEL_ERR_ARGUMENT`.
     */
    struct tessel_vad_options vad;
    /**
     * Time every word (faster-whisper's `word_timestamps`; default false): each segment's
     * `first_word` and `n_words` name its words, which `tessel_transcriber_words` copies
     * after the call; segment bounds move to their words as faster-whisper's do. The first
     * call that asks for it replaces the transcriber's session with one whose arena also
     * holds the alignment heads' cross-attention (heads × 448 × 1500 floats; the heads are
     * the directory's `alignment_heads`, else every head of the last half of the decoder
     * layers), which later calls keep.
     */
    bool word_timestamps;
    /**
     * With word timestamps: the punctuation marks merged into the word that follows them,
     * UTF-8, NUL-terminated (default faster-whisper's `"'“¿([{-`). NULL is
     * `TESSEL_ERR_NULL`, invalid UTF-8 `TESSEL_ERR_ARGUMENT`; not read without word
     * timestamps.
     */
    const char *prepend_punctuations;
    /**
     * With word timestamps: the punctuation marks merged into the word before them, as
     * `prepend_punctuations` (default faster-whisper's `"'.。,，!！?？:：”)]}、`).
     */
    const char *append_punctuations;
    /**
     * Beam search patience (faster-whisper's `patience`; default 1): a window's search goes
     * on until round(beam × patience) hypotheses have finished. Not finite or not above 0:
     * `TESSEL_ERR_ARGUMENT`.
     */
    float patience;
    /**
     * With word timestamps: skip silences longer than this many seconds around a likely
     * hallucination (faster-whisper's `hallucination_silence_threshold`); 0 (the default) is
     * off. Negative or not finite: `TESSEL_ERR_ARGUMENT`. Not read with `batch_size` above
     * 0 (checked all the same).
     */
    double hallucination_silence_threshold;
    /**
     * Chunks decoded together: 0 (the default) runs the sequential transcription; N in
     * 1..=`TESSEL_MAX_BATCH` runs faster-whisper's `BatchedInferencePipeline` (its
     * `batch_size`): the audio is cut into chunks of up to 30 s (see `vad`), N of them are
     * decoded together, without conditioning on earlier text, temperature fallback or
     * silence thresholds (the first temperature's decoding is kept), each chunk's segments
     * in the original audio's times. The first call with a `batch_size` above 0 makes the
     * transcriber a batched session of that many slots, which later calls keep; a call with
     * a larger `batch_size`, or with `word_timestamps` when the kept session cannot time
     * words, replaces it (never with fewer slots). Its arena holds per slot one window's
     * cross-attention keys and values, the beams' decoder caches and logits, and once what
     * a sequential session holds besides (encoder buffers, scratch, with word timestamps the
     * alignment heads' attention); the transcriber keeps its sequential session as well.
     * Above `TESSEL_MAX_BATCH`: `TESSEL_ERR_ARGUMENT`.
     */
    size_t batch_size;
    /**
     * With `batch_size` above 0: prompt each chunk with its own most likely language
     * (faster-whisper's batched `multilingual`; multilingual models, ignored on English-only
     * ones), even over `language`. Default false; true with `batch_size` 0 is
     * `TESSEL_ERR_ARGUMENT`.
     */
    bool multilingual;
} tessel_transcribe_options;

/**
 * One timed piece of a transcript; its text is `text[text_offset .. text_offset + text_len]`
 * of the text buffer the same call filled (UTF-8, not NUL-terminated on its own).
 */
typedef struct tessel_segment {
    /**
     * Start, seconds from the start of the audio.
     */
    double start;
    /**
     * End, seconds.
     */
    double end;
    /**
     * Byte offset of its text in the text buffer.
     */
    size_t text_offset;
    /**
     * Bytes of its text.
     */
    size_t text_len;
    /**
     * With word timestamps: the index of its first word among the words
     * `tessel_transcriber_words` copies (0 without).
     */
    size_t first_word;
    /**
     * With word timestamps: how many words it holds (0 without; a segment may have none).
     */
    size_t n_words;
} tessel_segment;

/**
 * One timed word of a transcript (faster-whisper's `Word`); its text is
 * `text[text_offset .. text_offset + text_len]` of the text buffer the same
 * `tessel_transcriber_words` call filled (UTF-8, with its leading space and the punctuation
 * merged into it, not NUL-terminated on its own).
 */
typedef struct tessel_word {
    /**
     * Start, seconds from the start of the audio (rounded to 10 ms, as faster-whisper's).
     */
    double start;
    /**
     * End, seconds.
     */
    double end;
    /**
     * The mean probability of its tokens.
     */
    double probability;
    /**
     * Byte offset of its text in the text buffer.
     */
    size_t text_offset;
    /**
     * Bytes of its text.
     */
    size_t text_len;
} tessel_word;

/**
 * How `tessel_translator_load` sets a translator up. Start from
 * `tessel_translate_options_default()`.
 */
typedef struct tessel_translate_options {
    /**
     * Source language code (e.g. "eng_Latn" for NLLB, "en_XX" for mBART), for the families
     * that take one; NULL for the tokenizer's default or families without languages.
     */
    const char *source_lang;
    /**
     * Target language code, as `source_lang` (it becomes the forced first token).
     */
    const char *target_lang;
    /**
     * Beam width, 1..=`TESSEL_MAX_BEAM` (128); 0 (the default) for the directory's
     * generation config (`num_beams`, or `num_return_sequences` when larger), which the
     * session is then planned for.
     */
    size_t beam;
    /**
     * Cut sources longer than the model reads (keeping the closing token) instead of
     * refusing them with `TESSEL_ERR_ARGUMENT`. Default false.
     */
    bool truncate;
    /**
     * Threads each GEMM runs on, at most `TESSEL_MAX_THREADS` (64); 0 (the default) for 1.
     */
    size_t threads;
    /**
     * Storage of the linear weights ("f32", "f16", "bf16", "bf16-dot"), NULL (the default)
     * for the stored type.
     */
    const char *weights;
} tessel_translate_options;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The library's version ("0.1.0"), NUL-terminated, static.
 */
const char *tessel_version(void);

/**
 * The name of status code `status` ("TESSEL_ERR_RUN"), or "unknown status" for a value that
 * is not one; NUL-terminated, static.
 */
const char *tessel_status_name(int32_t status);

/**
 * This thread's last error message, NUL-terminated ("" before any failure). The pointer stays
 * valid until the thread exits; the text it points to is replaced by the next failing call on
 * this thread (successful calls leave it). Never allocates.
 */
const char *tessel_last_error(void);

/**
 * Copies this thread's last error message, NUL-terminated, into `buf` (`cap` bytes) and its
 * length without the NUL into `*len`. `TESSEL_ERR_BUFFER_TOO_SMALL` (with `*len` written)
 * when `cap <= *len`; the message is kept either way. Messages are at most 1023 bytes.
 *
 * # Safety
 * `buf` is NULL or points to `cap` writable bytes; `len` is NULL or writable.
 */
enum tessel_status tessel_last_error_copy(char *buf, size_t cap, size_t *len);

/**
 * Forces the ISA level of sessions created from now on, in the whole process: "scalar",
 * "avx2", "avx512" or "neon" (a level this CPU lacks is `TESSEL_ERR_UNSUPPORTED`, an unknown
 * name `TESSEL_ERR_ARGUMENT`). NULL returns to the default: `TESSEL_ISA` if set, else the
 * best level. Existing sessions keep theirs.
 *
 * # Safety
 * `name` is NULL or a NUL-terminated string.
 */
enum tessel_status tessel_isa_force(const char *name);

/**
 * Writes into `*name` the ISA level sessions created now run at ("avx512", ...; static,
 * NUL-terminated). `TESSEL_ISA` naming a level this CPU lacks is `TESSEL_ERR_UNSUPPORTED`.
 *
 * # Safety
 * `name` is NULL or writable.
 */
enum tessel_status tessel_isa_name(const char **name);

/**
 * The default load options: beam 4, length 512, weights as stored.
 */
struct tessel_load_options tessel_load_options_default(void);

/**
 * Loads the model in directory `path` (UTF-8, NUL-terminated), detecting its format:
 * CTranslate2 (`model.bin`), Hugging Face Whisper, T5/mT5, Marian/BART/mBART/M2M100
 * (`config.json` with a `model_type`), or tessel's `nn.Transformer` layout (`config.json` and
 * `model.safetensors`). `options` may be NULL for the defaults. On success `*out` holds a
 * model with one reference. Allocates (the weights).
 *
 * # Safety
 * `path` is a NUL-terminated string; `options` is NULL or valid; `out` is NULL or writable.
 */
enum tessel_status tessel_model_load_dir(const char *path,
                                         const struct tessel_load_options *options,
                                         struct tessel_model **out);

/**
 * Loads `path` (UTF-8, NUL-terminated): a directory as `tessel_model_load_dir` does, a file
 * whose first bytes are the packed image's magic as `tessel_model_load_file` does; anything
 * else is `TESSEL_ERR_LOAD`. `options` (NULL for the defaults) applies to directories.
 * Allocates (the weights).
 *
 * # Safety
 * `path` is a NUL-terminated string; `options` is NULL or valid; `out` is NULL or writable.
 */
enum tessel_status tessel_model_load(const char *path,
                                     const struct tessel_load_options *options,
                                     struct tessel_model **out);

/**
 * Loads the packed image file at `path` (UTF-8, NUL-terminated; written by `tessel pack`):
 * read into memory and copied into the model, so the file may change afterwards. A malformed
 * image, or one with a NaN or infinite value in any float tensor (the message names the
 * tensor), is `TESSEL_ERR_LOAD`. On success `*out` holds a model with one reference. Allocates
 * (the weights).
 *
 * # Safety
 * `path` is a NUL-terminated string; `out` is NULL or writable.
 */
enum tessel_status tessel_model_load_file(const char *path, struct tessel_model **out);

/**
 * Reads the packed image in `data[0..len]` (one whole image, as `tessel pack` writes it) in
 * place: every tensor borrows these bytes, none is copied. `data` must start on a 64-byte
 * boundary (`TESSEL_ERR_MISALIGNED` otherwise, e.g. `aligned_alloc(64, ...)` or
 * `_Alignas(64)`); a malformed image, or one with a NaN or infinite value in any float tensor
 * (checked once here; the message names the tensor), is `TESSEL_ERR_LOAD`. The caller keeps the bytes alive
 * and unchanged until the model's last reference is released (sessions hold references).
 * On success `*out` holds a model with one reference. Allocates a few hundred bytes per
 * layer (the layers' descriptors), not the weights.
 *
 * # Safety
 * `data` is NULL or points to `len` readable bytes that stay valid and unwritten while the
 * model lives; `out` is NULL or writable.
 */
enum tessel_status tessel_model_load_memory(const uint8_t *data,
                                            size_t len,
                                            struct tessel_model **out);

/**
 * Loads the numbers model compiled into the library (English number words to digits; its
 * vocabulary makes `tessel_numbers_read` work). On success `*out` holds a model with one
 * reference. Allocates (the weights, about 0.6 MB).
 *
 * # Safety
 * `out` is NULL or writable.
 */
enum tessel_status tessel_model_load_numbers(struct tessel_model **out);

/**
 * Adds a reference to `model` (for another owner, e.g. another thread).
 *
 * # Safety
 * `model` is NULL or a handle from this library with at least one reference.
 */
enum tessel_status tessel_model_retain(struct tessel_model *model);

/**
 * Drops a reference to `model`; the last one (sessions hold one each) frees it. NULL is
 * accepted and does nothing.
 *
 * # Safety
 * `model` is NULL or a handle from this library with at least one reference owned by the
 * caller, which it gives up.
 */
enum tessel_status tessel_model_release(struct tessel_model *model);

/**
 * Writes `model`'s sizes, ids and maxima into `*info`.
 *
 * # Safety
 * `model` is NULL or a live handle; `info` is NULL or writable.
 */
enum tessel_status tessel_model_get_info(const struct tessel_model *model,
                                         struct tessel_model_info *info);

/**
 * Writes the bytes a session over `model` planned for `limits` (NULL: the model's maxima)
 * needs for its arena, or refuses limits above the model's: the size of the buffer
 * `tessel_session_new_in_buffer` needs with the same limits (the arena and up to 63 bytes to
 * reach a 64-byte boundary), and at most 63 bytes above what `tessel_session_new` allocates.
 *
 * # Safety
 * `model` is NULL or a live handle; `limits` is NULL or valid; `bytes` is NULL or writable.
 */
enum tessel_status tessel_session_arena_bytes(const struct tessel_model *model,
                                              const struct tessel_limits *limits,
                                              size_t *bytes);

/**
 * Creates a session over `model` planned for `limits` (NULL, or zero fields: the model's
 * maxima; threads 0: 1), at the ISA level `tessel_isa_name` reports. A length or beam above
 * the model's (`tessel_model_get_info`), or threads above `TESSEL_MAX_THREADS` (64), is
 * `TESSEL_ERR_ARGUMENT`; an arena that cannot be allocated `TESSEL_ERR_OUT_OF_MEMORY`. Allocates the arena
 * (`tessel_session_arena_bytes`) and starts `threads - 1` workers, once; nothing after this
 * allocates. The session holds a reference to the model.
 *
 * # Safety
 * `model` is NULL or a live model handle; `limits` is NULL or valid; `out` is NULL or
 * writable.
 */
enum tessel_status tessel_session_new(struct tessel_model *model,
                                      const struct tessel_limits *limits,
                                      struct tessel_session **out);

/**
 * Creates a session over `model` whose arena lives in the caller's `buffer` (`len` bytes,
 * any alignment): nothing is allocated for the arena, and the part used is zeroed. The buffer
 * must stay valid, and must not be touched, until `tessel_session_free` returns. The session
 * runs on the calling thread: `limits->threads` must be 0 or 1. `*needed` (NULL to skip)
 * receives the bytes the buffer needs, `tessel_session_arena_bytes` for the same limits;
 * a shorter buffer is `TESSEL_ERR_BUFFER_TOO_SMALL` and creates nothing. Otherwise as
 * `tessel_session_new`: the session's bookkeeping (the handle, the copy of the finished
 * hypotheses and the text call's source ids, about `4 · (max_beam · max_tgt_len +
 * max_src_len)` bytes) is allocated here, once.
 *
 * # Safety
 * `model` is NULL or a live model handle; `limits` is NULL or valid; `buffer` is NULL or
 * points to `len` writable bytes that outlive the session and are used by nothing else
 * meanwhile; `needed` and `out` are NULL or writable.
 */
enum tessel_status tessel_session_new_in_buffer(struct tessel_model *model,
                                                const struct tessel_limits *limits,
                                                void *buffer,
                                                size_t len,
                                                size_t *needed,
                                                struct tessel_session **out);

/**
 * Frees `session` (NULL is accepted) and drops its model reference. `TESSEL_ERR_BUSY` if
 * another thread is inside a call on it (then nothing is freed).
 *
 * # Safety
 * `session` is NULL or a live session handle; it must not be used after success.
 */
enum tessel_status tessel_session_free(struct tessel_session *session);

/**
 * Writes the limits `session` was planned for (zero fields resolved) into `*limits`.
 *
 * # Safety
 * `session` is NULL or a live session handle; `limits` is NULL or writable.
 */
enum tessel_status tessel_session_get_limits(struct tessel_session *session,
                                             struct tessel_limits *limits);

/**
 * Writes the ISA level `session` runs at into `*name` (static, NUL-terminated).
 *
 * # Safety
 * `session` is NULL or a live session handle; `name` is NULL or writable.
 */
enum tessel_status tessel_session_isa_name(struct tessel_session *session, const char **name);

/**
 * Runs the encoder over source ids `ids[0..len]` and resets the decoder. Refused with
 * `TESSEL_ERR_RUN` (the session unchanged): an empty source or one longer than the session's
 * `max_src_len`, an id at or above the model's `src_vocab`, a model that reads audio.
 *
 * # Safety
 * `session` is NULL or a live session handle; `ids` is NULL or points to `len` ids.
 */
enum tessel_status tessel_encode(struct tessel_session *session, const uint32_t *ids, size_t len);

/**
 * Forgets the decoded positions and keeps the encoded source (and its cross-attention K/V):
 * the next `tessel_decode_step` starts again at position 0.
 *
 * # Safety
 * `session` is NULL or a live session handle.
 */
enum tessel_status tessel_reset_decoder(struct tessel_session *session);

/**
 * Runs a Whisper-style model's convolutional front end and encoder over log-mel features
 * `mel[0..len]`, laid out `n_mels × frames` (bin-major), `frames` even and at most
 * `2 · max_src_len` (3000, one 30 s window, for Whisper); resets the decoder. Other lengths,
 * or a model that reads tokens, are `TESSEL_ERR_RUN`.
 *
 * # Safety
 * `session` is NULL or a live session handle; `mel` is NULL or points to `len` floats.
 */
enum tessel_status tessel_encode_audio(struct tessel_session *session,
                                       const float *mel,
                                       size_t len);

/**
 * Decodes one position for each of `beams` rows: row `i` continues with `tokens[i]`. The
 * logits, `beams × tgt_vocab` floats, are copied into `logits` (`logits_cap` floats) and their
 * count into `*logits_len`. A buffer too small is refused before the step runs
 * (`TESSEL_ERR_BUFFER_TOO_SMALL`, `*logits_len` written, session unchanged). The first step
 * after encode sets the number of beams (1..=the session's `max_beam`); later steps keep it
 * (`tessel_reorder_beams` changes which history each row continues). A step past the
 * session's `max_tgt_len` positions, an id at or above `tgt_vocab`, or no encode yet is
 * `TESSEL_ERR_RUN`.
 *
 * # Safety
 * `session` is NULL or a live session handle; `tokens` is NULL or points to `beams` ids;
 * `logits` is NULL or points to `logits_cap` writable floats; `logits_len` is NULL or
 * writable.
 */
enum tessel_status tessel_decode_step(struct tessel_session *session,
                                      const uint32_t *tokens,
                                      size_t beams,
                                      float *logits,
                                      size_t logits_cap,
                                      size_t *logits_len);

/**
 * Makes beam `i` continue the history of beam `parents[i]` for `i < n` (the number of beams
 * becomes `n`), by copying cache rows inside the arena.
 *
 * # Safety
 * `session` is NULL or a live session handle; `parents` is NULL or points to `n` indices.
 */
enum tessel_status tessel_reorder_beams(struct tessel_session *session,
                                        const uint32_t *parents,
                                        size_t n);

/**
 * The default search: greedy, as many steps as the session allows, length penalty 1, stop
 * at EOS, from BOS, no callback.
 */
struct tessel_generate_options tessel_generate_options_default(void);

/**
 * Writes into `*tokens` and `*len` the tokens hypothesis `beam` has generated so far in the
 * step `step` describes (`step->step` of them, the prefix excluded). Valid only inside the
 * callback that received `step`.
 *
 * # Safety
 * `step` is NULL or the pointer a step callback received, used during that call; `tokens`
 * and `len` are NULL or writable.
 */
enum tessel_status tessel_step_tokens(const struct tessel_step *step,
                                      size_t beam,
                                      const uint32_t **tokens,
                                      size_t *len);

/**
 * Greedy or beam search over the encoded source, as `options` says (NULL: the defaults).
 * The finished hypotheses, best first, are kept in the session until its next search; their
 * count is written into `*count`; read each with `tessel_hypothesis`. Refused
 * (`TESSEL_ERR_RUN`): no encode yet, a beam of 0 or above the session's `max_beam`, a prefix
 * and `max_steps` needing more than its `max_tgt_len` positions, a prefix id outside the
 * target vocabulary, a step whose logits (NaN weights) leave nothing finite to rank. A step
 * callback that leaves no finite logit is `TESSEL_ERR_ARGUMENT`.
 *
 * # Safety
 * `session` is NULL or a live session handle; `options` is NULL or valid, with `prefix`
 * pointing to `prefix_len` ids; `count` is NULL or writable.
 */
enum tessel_status tessel_generate(struct tessel_session *session,
                                   const struct tessel_generate_options *options,
                                   size_t *count);

/**
 * Copies hypothesis `index` (0 is the best) of the last `tessel_generate` into `tokens`
 * (`cap` ids; BOS and the prefix excluded, EOS included when produced), its length into
 * `*len` and its score (length-normalised log-probability) into `*score` (NULL to skip).
 * `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap < *len`.
 *
 * # Safety
 * `session` is NULL or a live session handle; `tokens` is NULL or points to `cap` writable
 * ids; `len` is NULL or writable; `score` is NULL or writable.
 */
enum tessel_status tessel_hypothesis(struct tessel_session *session,
                                     size_t index,
                                     uint32_t *tokens,
                                     size_t cap,
                                     size_t *len,
                                     float *score);

/**
 * Reads English number words in `text` (UTF-8, NUL-terminated) with a model that came with a
 * numbers vocabulary (`tessel_model_load_numbers`): tokenises, encodes, searches greedily and
 * writes the digits, NUL-terminated, into `out` (`cap` bytes) and their length into `*len`.
 * `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap <= *len`; a character the
 * vocabulary lacks, or a text too long, is `TESSEL_ERR_ARGUMENT`. This text call allocates
 * (the decoded string); the token-level calls do not.
 *
 * # Safety
 * `session` is NULL or a live session handle; `text` is NULL or NUL-terminated; `out` is
 * NULL or points to `cap` writable bytes; `len` is NULL or writable.
 */
enum tessel_status tessel_numbers_read(struct tessel_session *session,
                                       const char *text,
                                       char *out,
                                       size_t cap,
                                       size_t *len);

/**
 * Creates a batch of `max_batch` slots (1..=`TESSEL_MAX_BATCH`, 1024) over `model`, each
 * planned for `limits` as `tessel_session_new` plans a session (NULL, or zero fields: the
 * model's maxima; threads 0: 1), at the ISA level `tessel_isa_name` reports. Every step runs
 * up to `max_batch × max_beam` decoder rows together. Limits out of range are
 * `TESSEL_ERR_ARGUMENT`; an arena that cannot be allocated `TESSEL_ERR_OUT_OF_MEMORY`.
 * Allocates the arena and every slot's bookkeeping and starts `threads - 1` workers, once;
 * nothing after this allocates. The batch holds a reference to the model.
 *
 * # Safety
 * `model` is NULL or a live model handle; `limits` is NULL or valid; `out` is NULL or
 * writable.
 */
enum tessel_status tessel_batch_new(struct tessel_model *model,
                                    const struct tessel_limits *limits,
                                    size_t max_batch,
                                    struct tessel_batch **out);

/**
 * Frees `batch` (NULL is accepted) and drops its model reference; running searches end with
 * it. `TESSEL_ERR_BUSY` if another thread is inside a call on it (then nothing is freed).
 *
 * # Safety
 * `batch` is NULL or a live batch handle; it must not be used after success.
 */
enum tessel_status tessel_batch_free(struct tessel_batch *batch);

/**
 * Writes the limits each slot of `batch` was planned for (zero fields resolved) into
 * `*limits` and its number of slots into `*max_batch` (NULL to skip either).
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `limits` and `max_batch` are NULL or writable.
 */
enum tessel_status tessel_batch_get_limits(struct tessel_batch *batch,
                                           struct tessel_limits *limits,
                                           size_t *max_batch);

/**
 * Runs the encoder over source ids `ids[0..len]` into slot `slot`, replacing what the slot
 * held (its last search's hypotheses included); the other slots, running or not, are left
 * alone. A slot at or above `max_batch` is `TESSEL_ERR_ARGUMENT`; a slot whose search is
 * running, an empty source or one longer than `max_src_len`, an id at or above the model's
 * `src_vocab`, or a model that reads audio is `TESSEL_ERR_RUN` (the slot unchanged).
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `ids` is NULL or points to `len` ids.
 */
enum tessel_status tessel_batch_encode(struct tessel_batch *batch,
                                       size_t slot,
                                       const uint32_t *ids,
                                       size_t len);

/**
 * Starts a search over slot `slot`'s encoded source as `options` says (NULL: the defaults;
 * as `tessel_generate` takes them): a prefix longer than one token is fed now, and from the
 * next `tessel_batch_step` the slot decodes together with the other running slots. The
 * options are copied (the prefix is read during this call only); `on_step` is called with
 * `user_data` after each of the slot's steps, inside `tessel_batch_step`. Refused, the slot
 * unchanged: a slot at or above `max_batch` (`TESSEL_ERR_ARGUMENT`); a slot with no encoded
 * source, one whose search is still running, a beam of 0 or above `max_beam`, a prefix and
 * `max_steps` needing more than `max_tgt_len` positions, a prefix id outside the target
 * vocabulary (`TESSEL_ERR_RUN`).
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `options` is NULL or valid, with `prefix` pointing
 * to `prefix_len` ids, and its `user_data` valid for `on_step` until the slot's search ends.
 */
enum tessel_status tessel_batch_submit(struct tessel_batch *batch,
                                       size_t slot,
                                       const struct tessel_generate_options *options);

/**
 * Runs one decoder step over every running slot's beams together, then each slot's search
 * step (and its step callback), and writes how many slots are still running into
 * `*running`. A slot whose search ends (EOS, `max_steps`, or a step callback that left no
 * finite logit) stops running; read it with `tessel_batch_finished`. No running slot is
 * `TESSEL_ERR_RUN` (nothing to step: submit one first).
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `running` is NULL or writable.
 */
enum tessel_status tessel_batch_step(struct tessel_batch *batch, size_t *running);

/**
 * Writes whether slot `slot`'s search is running (submitted and not yet ended) into
 * `*running`. A slot at or above `max_batch` is `TESSEL_ERR_ARGUMENT`.
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `running` is NULL or writable.
 */
enum tessel_status tessel_batch_running(struct tessel_batch *batch, size_t slot, bool *running);

/**
 * Writes the number of finished hypotheses of slot `slot`'s last search into `*count`; read
 * each with `tessel_batch_hypothesis`. They stay readable until the slot's next encode or
 * submit, whatever the other slots do. Refused (`*count` 0): a slot at or above `max_batch`
 * (`TESSEL_ERR_ARGUMENT`); a search still running, or none submitted since the slot's last
 * encode (`TESSEL_ERR_RUN`); a search that ended on logits with nothing finite to rank
 * (`TESSEL_ERR_ARGUMENT` when its step callback left them so, `TESSEL_ERR_RUN` otherwise).
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `count` is NULL or writable.
 */
enum tessel_status tessel_batch_finished(struct tessel_batch *batch, size_t slot, size_t *count);

/**
 * Copies hypothesis `index` (0 is the best) of slot `slot`'s finished search into `tokens`
 * (`cap` ids; BOS and the prefix excluded, EOS included when produced), its length into
 * `*len` and its score (length-normalised log-probability) into `*score` (NULL to skip), as
 * `tessel_hypothesis` does for a session. `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written
 * when `cap < *len`; an index at or above the count is `TESSEL_ERR_ARGUMENT`; otherwise
 * refused as `tessel_batch_finished`.
 *
 * # Safety
 * `batch` is NULL or a live batch handle; `tokens` is NULL or points to `cap` writable ids;
 * `len` is NULL or writable; `score` is NULL or writable.
 */
enum tessel_status tessel_batch_hypothesis(struct tessel_batch *batch,
                                           size_t slot,
                                           size_t index,
                                           uint32_t *tokens,
                                           size_t cap,
                                           size_t *len,
                                           float *score);

/**
 * The reference's defaults: beam 5, timestamps, conditioned on previous text, transcribe,
 * language detected, no prompt (temperature fallback 0, 0.2 … 1.0 with best of 5), no voice
 * activity detection, no word timestamps (with faster-whisper's punctuation strings, static).
 */
struct tessel_transcribe_options tessel_transcribe_options_default(void);

/**
 * faster-whisper's `BatchedInferencePipeline.transcribe` defaults: as
 * `tessel_transcribe_options_default()`, but `batch_size` 8, no timestamps (one segment per
 * chunk) and voice activity detection on with the batched pipeline's detector options
 * (`max_speech_duration_s` 30, `min_silence_duration_ms` 160, the others faster-whisper's
 * `VadOptions` defaults).
 */
struct tessel_transcribe_options tessel_transcribe_options_batched(void);

/**
 * Loads the Whisper model in directory `path` (UTF-8, NUL-terminated; Hugging Face or
 * CTranslate2 with its tokenizer) and creates its session for beams up to `max_beam`
 * (1..=`TESSEL_MAX_BEAM`, 128; 0: 5) on `threads` threads (at most `TESSEL_MAX_THREADS`, 64;
 * 0: 1). The session holds one 30 s window (1500 encoder positions) and the model's decoder
 * positions (448); a batched session (`tessel_transcribe_options.batch_size`) is made at the
 * first call that asks for one. `multilingual` is 1 to treat the model as multilingual
 * (language and task tokens, language detection), 0 as English-only, -1 to decide by its
 * vocabulary size as the reference does. Refused: a directory that cannot be loaded
 * (`TESSEL_ERR_LOAD`); a directory of a text-to-text model or a model that does not read audio
 * (`TESSEL_ERR_UNSUPPORTED`, naming what the directory is); `max_beam` or `threads` out of
 * range, `multilingual` outside -1..=1, or 1 for a model its directory says is English-only (a
 * `.en` vocabulary of 51864 tokens, CTranslate2's empty `lang_ids`, `is_multilingual: false`),
 * which would end every window at once (`TESSEL_ERR_ARGUMENT`). On success `*out` holds the
 * transcriber. Allocates (the weights, the tokenizer, the arena).
 *
 * # Safety
 * `path` is NULL or NUL-terminated; `out` is NULL or writable.
 */
enum tessel_status tessel_transcriber_load(const char *path,
                                           size_t max_beam,
                                           size_t threads,
                                           int32_t multilingual,
                                           struct tessel_transcriber **out);

/**
 * Transcribes `samples[0..n_samples]`, 16 kHz mono floats in [-1, 1], as `options` (NULL:
 * the defaults) say. Writes the segments, in time order, into `segments` (`segments_cap`
 * of them) and their count into `*n_segments`; their texts, concatenated and NUL-terminated
 * (the transcript's text), into `text` (`text_cap` bytes) and its length without the NUL into
 * `*text_len`. When `segments_cap < *n_segments` or `text_cap <= *text_len` the call returns
 * `TESSEL_ERR_BUFFER_TOO_SMALL` with both sizes written and keeps the transcript: a retry
 * with the same samples and options copies it. With `options.word_timestamps`, each
 * segment's `first_word` and `n_words` name its words, which `tessel_transcriber_words`
 * copies after this call (after `TESSEL_OK` or `TESSEL_ERR_BUFFER_TOO_SMALL`). With
 * `options.batch_size` above 0 the batched pipeline transcribes (see the field), words
 * included. Refused: less than 10 ms of audio, non-finite samples, options out of range (a
 * beam of 0 or above the transcriber's `max_beam`, a language as `language` says,
 * `translate` on an English-only model, `vad` as `tessel_vad_options` says, punctuation
 * strings that are not UTF-8, `patience`, `hallucination_silence_threshold`, `batch_size`
 * or `multilingual` as their fields say), and with `batch_size` above 0 audio of 30 s or
 * more with `vad.enabled` false (`TESSEL_ERR_ARGUMENT`); a NULL punctuation string with
 * word timestamps (`TESSEL_ERR_NULL`); a batched session whose arena cannot be allocated
 * (`TESSEL_ERR_OUT_OF_MEMORY`); generated ids the tokenizer cannot decode are
 * `TESSEL_ERR_RUN`. Allocates.
 *
 * # Safety
 * `transcriber` is NULL or a live transcriber; `samples` is NULL or points to `n_samples`
 * floats; `options` is NULL or valid; `segments` and `text` are NULL or point to their
 * capacities of writable elements; `n_segments` and `text_len` are NULL or writable.
 */
enum tessel_status tessel_transcribe(struct tessel_transcriber *transcriber,
                                     const float *samples,
                                     size_t n_samples,
                                     const struct tessel_transcribe_options *options,
                                     struct tessel_segment *segments,
                                     size_t segments_cap,
                                     size_t *n_segments,
                                     char *text,
                                     size_t text_cap,
                                     size_t *text_len);

/**
 * `tessel_transcribe` over the WAV file at `path` (UTF-8, NUL-terminated; PCM 8/16/24/32-bit
 * or float, any rate and channel count, mixed to mono and resampled to 16 kHz). A file that
 * cannot be read or decoded is `TESSEL_ERR_LOAD`.
 *
 * # Safety
 * As `tessel_transcribe`, with `path` NULL or NUL-terminated.
 */
enum tessel_status tessel_transcribe_wav(struct tessel_transcriber *transcriber,
                                         const char *path,
                                         const struct tessel_transcribe_options *options,
                                         struct tessel_segment *segments,
                                         size_t segments_cap,
                                         size_t *n_segments,
                                         char *text,
                                         size_t text_cap,
                                         size_t *text_len);

/**
 * Copies the words of the transcriber's latest transcription (`tessel_transcribe` or
 * `tessel_transcribe_wav` with `options.word_timestamps`, which returned `TESSEL_OK` or
 * `TESSEL_ERR_BUFFER_TOO_SMALL`): every segment's words in order, segment `i`'s at
 * `words[segments[i].first_word ..]` (`segments[i].n_words` of them), into `words`
 * (`words_cap` of them) and their count into `*n_words`; their texts, concatenated and
 * NUL-terminated, into `text` (`text_cap` bytes), each word indexing it, and its length
 * without the NUL into `*text_len`. When `words_cap < *n_words` or `text_cap <= *text_len`
 * the call returns `TESSEL_ERR_BUFFER_TOO_SMALL` with both sizes written; the words stay
 * readable. `TESSEL_ERR_RUN` when the latest transcription call failed (or there was none)
 * or did not time words. Changes nothing in the transcriber.
 *
 * # Safety
 * `transcriber` is NULL or a live transcriber; `words` and `text` are NULL or point to their
 * capacities of writable elements; `n_words` and `text_len` are NULL or writable.
 */
enum tessel_status tessel_transcriber_words(struct tessel_transcriber *transcriber,
                                            struct tessel_word *words,
                                            size_t words_cap,
                                            size_t *n_words,
                                            char *text,
                                            size_t text_cap,
                                            size_t *text_len);

/**
 * Frees `transcriber` (NULL is accepted). `TESSEL_ERR_BUSY` if another thread is inside a
 * call on it (then nothing is freed).
 *
 * # Safety
 * `transcriber` is NULL or a live transcriber; it must not be used after success.
 */
enum tessel_status tessel_transcriber_free(struct tessel_transcriber *transcriber);

/**
 * The default translator setup: the tokenizer's languages, the directory's beam, no
 * truncation, one thread, stored weights.
 */
struct tessel_translate_options tessel_translate_options_default(void);

/**
 * Loads the translation model in directory `path` (UTF-8, NUL-terminated) with its tokenizer
 * and generation config, and creates its session, as `options` (NULL: the defaults) say: it
 * is planned for `options->beam`, or without one for the generation config's beam, so every
 * translation with the defaults fits it. Refused: a directory that cannot be loaded
 * (`TESSEL_ERR_LOAD`), an unknown language code, a beam above `TESSEL_MAX_BEAM` or threads
 * above `TESSEL_MAX_THREADS` (`TESSEL_ERR_ARGUMENT`), a speech model or a generation config
 * asking for a beam above `TESSEL_MAX_BEAM` (`TESSEL_ERR_UNSUPPORTED`, naming what the
 * directory is). On success `*out` holds the translator. Allocates (the weights, the
 * tokenizer, the arena).
 *
 * # Safety
 * `path` is NULL or NUL-terminated; `options` is NULL or valid, its strings NULL or
 * NUL-terminated; `out` is NULL or writable.
 */
enum tessel_status tessel_translator_load(const char *path,
                                          const struct tessel_translate_options *options,
                                          struct tessel_translator **out);

/**
 * Translates `text` (UTF-8, NUL-terminated) and writes the best hypothesis's text,
 * NUL-terminated, into `out` (`cap` bytes) and its length without the NUL into `*len`.
 * `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap <= *len`: the translation is
 * kept, and a retry with the same text copies it. A source the tokenizer refuses, or longer
 * than the model's `max_src_len` without `truncate`, is `TESSEL_ERR_ARGUMENT`; generated ids
 * the tokenizer cannot decode are `TESSEL_ERR_RUN`.
 * Allocates (tokens and strings).
 *
 * # Safety
 * `translator` is NULL or a live translator; `text` is NULL or NUL-terminated; `out` is NULL
 * or points to `cap` writable bytes; `len` is NULL or writable.
 */
enum tessel_status tessel_translate(struct tessel_translator *translator,
                                    const char *text,
                                    char *out,
                                    size_t cap,
                                    size_t *len);

/**
 * Translates `lines[0..n]` (each UTF-8, NUL-terminated) decoding up to `max_batch` of them
 * together (1..=`TESSEL_MAX_BATCH`), sorted by length as CTranslate2's `translate_batch`
 * does; each line's text is the one `tessel_translate` gives it. The outputs are written in
 * input order into `out` (`cap` bytes), each NUL-terminated, line `i`'s from
 * `out + offsets[i]` (`offsets`: `n` entries); `*len` receives the bytes they take, NULs
 * included. `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` and `offsets` written when
 * `cap < *len`: the outputs are kept, and a retry with the same lines copies them. A line
 * that fails (refused by the tokenizer, too long without `truncate`) gets an empty output
 * and its status in `statuses[i]` (NULL to skip; `TESSEL_OK` for the others), and the call
 * returns the first failing line's status, its message naming the line, after writing every
 * output. The first call, and one with another `max_batch`, plans the batch's arena.
 * Allocates.
 *
 * # Safety
 * `translator` is NULL or a live translator; `lines` is NULL or points to `n` pointers,
 * each NULL or NUL-terminated; `out` is NULL or points to `cap` writable bytes; `offsets` is
 * NULL or points to `n` writable sizes; `len` is NULL or writable; `statuses` is NULL or
 * points to `n` writable statuses.
 */
enum tessel_status tessel_translate_batch(struct tessel_translator *translator,
                                          const char *const *lines,
                                          size_t n,
                                          size_t max_batch,
                                          char *out,
                                          size_t cap,
                                          size_t *offsets,
                                          size_t *len,
                                          enum tessel_status *statuses);

/**
 * Frees `translator` (NULL is accepted). `TESSEL_ERR_BUSY` if another thread is inside a
 * call on it (then nothing is freed).
 *
 * # Safety
 * `translator` is NULL or a live translator; it must not be used after success.
 */
enum tessel_status tessel_translator_free(struct tessel_translator *translator);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* TESSEL_H */
