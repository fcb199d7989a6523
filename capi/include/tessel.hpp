// tessel.hpp: a header-only C++17 wrapper over tessel.h (RAII handles, exceptions).
// SPDX-License-Identifier: MIT OR Apache-2.0
//
// - tessel::Model owns one reference to a tessel_model: copying it shares the model
//   (tessel_model_retain), destruction releases the reference.
// - tessel::Session owns a tessel_session: move-only, freed on destruction. One thread at a
//   time, as in C.
// - tessel::Translator and tessel::Transcriber own a tessel_translator / tessel_transcriber:
//   move-only, one thread at a time; their calls allocate, as the C task-level calls do.
// - A failing call throws tessel::Error (the status and tessel_last_error()).
// - The pointer-and-size overloads (encode, decode_step, hypothesis into a buffer) allocate
//   nothing after the session exists, as the C calls; the std::vector / std::string
//   conveniences allocate in the caller's program.
// - A step callback may be any callable; an exception it throws is caught before it could
//   cross tessel, the rest of the search runs without it, and the exception is rethrown when
//   generate returns.
#ifndef TESSEL_HPP
#define TESSEL_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tessel.h"

namespace tessel {

/// A failed call: its status and message.
class Error : public std::runtime_error {
  public:
    Error(tessel_status status, const char *message)
        : std::runtime_error(std::string(tessel_status_name(status)) + ": " + message),
          status_(status) {}

    /// The status the call returned.
    tessel_status status() const noexcept { return status_; }

  private:
    tessel_status status_;
};

/// Throws Error unless `status` is TESSEL_OK.
inline void check(tessel_status status) {
    if (status != TESSEL_OK) {
        throw Error(status, tessel_last_error());
    }
}

namespace detail {

/// Owns one C handle, freed by `Free` on destruction (a NULL one too, which the C calls
/// accept): move-only. Session, Translator and Transcriber hold their handles in one.
template <class T, tessel_status (*Free)(T *)>
class Owned {
  public:
    Owned() = default;
    Owned(const Owned &) = delete;
    Owned &operator=(const Owned &) = delete;
    Owned(Owned &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Owned &operator=(Owned &&other) noexcept {
        std::swap(handle_, other.handle_);
        return *this;
    }
    ~Owned() { Free(handle_); }

    /// The handle, still owned.
    T *get() const noexcept { return handle_; }
    /// Where the C call that creates the handle writes it.
    T **out() noexcept { return &handle_; }

  private:
    T *handle_ = nullptr;
};

}  // namespace detail

/// One reference to an immutable, shared model.
class Model {
  public:
    /// The numbers model compiled into the library.
    static Model numbers() {
        tessel_model *model = nullptr;
        check(tessel_model_load_numbers(&model));
        return Model(model);
    }

    /// The model in `dir` (format detected); `options` may be null for the defaults.
    static Model load_dir(const std::string &dir, const tessel_load_options *options = nullptr) {
        tessel_model *model = nullptr;
        check(tessel_model_load_dir(dir.c_str(), options, &model));
        return Model(model);
    }

    /// The model at `path`: a directory, or a packed image file (detected).
    static Model load(const std::string &path, const tessel_load_options *options = nullptr) {
        tessel_model *model = nullptr;
        check(tessel_model_load(path.c_str(), options, &model));
        return Model(model);
    }

    /// The packed image at `data` (64-byte aligned, `len` bytes), read in place: the bytes
    /// must outlive every copy of this Model and every Session over it.
    static Model load_memory(const void *data, std::size_t len) {
        tessel_model *model = nullptr;
        check(tessel_model_load_memory(static_cast<const std::uint8_t *>(data), len, &model));
        return Model(model);
    }

    Model(const Model &other) : model_(other.model_) { check(tessel_model_retain(model_)); }
    Model(Model &&other) noexcept : model_(std::exchange(other.model_, nullptr)) {}
    Model &operator=(Model other) noexcept {
        std::swap(model_, other.model_);
        return *this;
    }
    ~Model() { tessel_model_release(model_); }

    /// Sizes, ids and maxima.
    tessel_model_info info() const {
        tessel_model_info info{};
        check(tessel_model_get_info(model_, &info));
        return info;
    }

    /// Bytes a session planned for `limits` (null: the model's maxima) needs for its arena: the
    /// buffer size tessel_session_new_in_buffer needs.
    std::size_t arena_bytes(const tessel_limits *limits = nullptr) const {
        std::size_t bytes = 0;
        check(tessel_session_arena_bytes(model_, limits, &bytes));
        return bytes;
    }

    /// The C handle, still owned by this object.
    tessel_model *get() const noexcept { return model_; }

  private:
    explicit Model(tessel_model *model) noexcept : model_(model) {}
    tessel_model *model_;
};

/// A finished hypothesis.
struct Hypothesis {
    std::vector<std::uint32_t> tokens;
    float score;
};

/// One model's working state, its arena allocated once here.
class Session {
  public:
    /// A session over `model` planned for `limits` (null: the model's maxima).
    explicit Session(const Model &model, const tessel_limits *limits = nullptr) {
        check(tessel_session_new(model.get(), limits, session_.out()));
    }

    /// Runs the encoder over `len` source ids.
    void encode(const std::uint32_t *ids, std::size_t len) {
        check(tessel_encode(get(), ids, len));
    }
    void encode(const std::vector<std::uint32_t> &ids) { encode(ids.data(), ids.size()); }

    /// One decoder step for `beams` rows; returns the logits written (beams × tgt_vocab).
    std::size_t decode_step(const std::uint32_t *tokens, std::size_t beams, float *logits,
                            std::size_t cap) {
        std::size_t len = 0;
        check(tessel_decode_step(get(), tokens, beams, logits, cap, &len));
        return len;
    }

    /// Greedy or beam search; returns the number of hypotheses.
    std::size_t generate(const tessel_generate_options &options) {
        std::size_t count = 0;
        check(tessel_generate(get(), &options, &count));
        return count;
    }

    /// Search calling `on_step(tessel_step &)` after every step (options.on_step is replaced).
    template <class F>
    std::size_t generate(tessel_generate_options options, F &&on_step) {
        struct Context {
            F *callable;
            std::exception_ptr error;
        } context{&on_step, nullptr};
        options.on_step = [](void *user_data, tessel_step *step) {
            auto *ctx = static_cast<Context *>(user_data);
            if (ctx->error) {
                return;
            }
            try {
                (*ctx->callable)(*step);
            } catch (...) {
                ctx->error = std::current_exception();
            }
        };
        options.user_data = &context;
        std::size_t count = generate(options);
        if (context.error) {
            std::rethrow_exception(context.error);
        }
        return count;
    }

    /// Hypothesis `index` of the last search into `tokens` (`cap` ids); returns its length.
    std::size_t hypothesis(std::size_t index, std::uint32_t *tokens, std::size_t cap,
                           float *score = nullptr) {
        std::size_t len = 0;
        check(tessel_hypothesis(get(), index, tokens, cap, &len, score));
        return len;
    }

    /// Hypothesis `index` of the last search.
    Hypothesis hypothesis(std::size_t index) {
        Hypothesis h{{}, 0.0f};
        std::size_t len = 0;
        tessel_status status = tessel_hypothesis(get(), index, nullptr, 0, &len, &h.score);
        if (status != TESSEL_ERR_BUFFER_TOO_SMALL) {
            check(status);
        }
        h.tokens.resize(len);
        check(tessel_hypothesis(get(), index, h.tokens.data(), len, &len, &h.score));
        return h;
    }

    /// The numbers model's reading of `text` (its digits).
    std::string read_numbers(const std::string &text) {
        std::string out(16, '\0');
        std::size_t len = 0;
        tessel_status status =
            tessel_numbers_read(get(), text.c_str(), out.data(), out.size(), &len);
        if (status == TESSEL_ERR_BUFFER_TOO_SMALL) {
            out.assign(len + 1, '\0');
            status = tessel_numbers_read(get(), text.c_str(), out.data(), out.size(), &len);
        }
        check(status);
        out.resize(len);
        return out;
    }

    /// The C handle, still owned by this object.
    tessel_session *get() const noexcept { return session_.get(); }

  private:
    detail::Owned<tessel_session, tessel_session_free> session_;
};

/// The string a call writes into a caller buffer, `call(buffer, capacity, &len)`: first with
/// a 256-byte buffer, then, when the call reports a larger size, once more with that size.
template <class F>
std::string fill_string(F &&call) {
    std::string out(256, '\0');
    std::size_t len = 0;
    tessel_status status = call(out.data(), out.size(), &len);
    if (status == TESSEL_ERR_BUFFER_TOO_SMALL) {
        out.assign(len + 1, '\0');
        status = call(out.data(), out.size(), &len);
    }
    check(status);
    out.resize(len);
    return out;
}

/// A translation model with its tokenizer and one session (tessel_translator).
class Translator {
  public:
    /// Loads the directory `dir`; `options` may be null for the defaults.
    explicit Translator(const std::string &dir, const tessel_translate_options *options = nullptr) {
        check(tessel_translator_load(dir.c_str(), options, translator_.out()));
    }

    /// The best translation of `text`.
    std::string translate(const std::string &text) {
        return fill_string([&](char *out, std::size_t cap, std::size_t *len) {
            return tessel_translate(get(), text.c_str(), out, cap, len);
        });
    }

    /// The C handle, still owned by this object.
    tessel_translator *get() const noexcept { return translator_.get(); }

  private:
    detail::Owned<tessel_translator, tessel_translator_free> translator_;
};

/// One timed piece of a transcript.
struct Segment {
    double start;
    double end;
    std::string text;
};

/// A Whisper model with its tokenizer and one session (tessel_transcriber).
class Transcriber {
  public:
    /// Loads the directory `dir` for beams up to `max_beam` on `threads` threads;
    /// `multilingual`: 1, 0, or -1 to decide by the vocabulary.
    explicit Transcriber(const std::string &dir, std::size_t max_beam = 5, std::size_t threads = 1,
                         std::int32_t multilingual = -1) {
        check(tessel_transcriber_load(dir.c_str(), max_beam, threads, multilingual,
                                      transcriber_.out()));
    }

    /// The segments of 16 kHz mono `samples`; `options` may be null for the defaults.
    std::vector<Segment> transcribe(const std::vector<float> &samples,
                                    const tessel_transcribe_options *options = nullptr) {
        return collect([&](tessel_segment *segments, std::size_t cap, std::size_t *n, char *text,
                           std::size_t text_cap, std::size_t *len) {
            return tessel_transcribe(get(), samples.data(), samples.size(), options,
                                     segments, cap, n, text, text_cap, len);
        });
    }

    /// The segments of the WAV file at `path`.
    std::vector<Segment> transcribe_wav(const std::string &path,
                                        const tessel_transcribe_options *options = nullptr) {
        return collect([&](tessel_segment *segments, std::size_t cap, std::size_t *n, char *text,
                           std::size_t text_cap, std::size_t *len) {
            return tessel_transcribe_wav(get(), path.c_str(), options, segments, cap, n,
                                         text, text_cap, len);
        });
    }

    /// The C handle, still owned by this object.
    tessel_transcriber *get() const noexcept { return transcriber_.get(); }

  private:
    /// Calls `call` with no arrays for the sizes, then with arrays of those sizes (the
    /// transcript is kept between the two calls, not computed again).
    template <class F>
    static std::vector<Segment> collect(F &&call) {
        std::size_t n = 0, len = 0;
        tessel_status status = call(nullptr, 0, &n, nullptr, 0, &len);
        if (status != TESSEL_ERR_BUFFER_TOO_SMALL) {
            check(status);
        }
        std::vector<tessel_segment> raw(n);
        std::string text(len + 1, '\0');
        check(call(raw.data(), raw.size(), &n, text.data(), text.size(), &len));
        std::vector<Segment> segments;
        segments.reserve(n);
        for (const tessel_segment &s : raw) {
            segments.push_back({s.start, s.end, text.substr(s.text_offset, s.text_len)});
        }
        return segments;
    }

    detail::Owned<tessel_transcriber, tessel_transcriber_free> transcriber_;
};

}  // namespace tessel

#endif  // TESSEL_HPP
