/*
 * transcribe.c: speech to timed text through tessel's C API.
 *
 *   transcribe MODEL_DIR WAV [words] [batched]
 *
 * MODEL_DIR is a Whisper model directory (Hugging Face or CTranslate2, with its tokenizer);
 * WAV is a 16 kHz mono 16-bit PCM file. The example reads the WAV itself into a float buffer
 * and transcribes the buffer (greedy, with timestamps) into arrays sized from the first call's
 * report; then it transcribes the file by path and fails unless both give the same segments.
 * It fails too unless an unknown language ("xx") is refused with TESSEL_ERR_ARGUMENT. Last,
 * it transcribes the speech alone (voice activity detection on) and checks it gets ordered,
 * non-negative segment times. With `words`, the transcriptions of the whole clip also time
 * their words (word_timestamps, faster-whisper's punctuation): the example prints the words
 * with their segments, times and probabilities, and fails unless each segment's words follow
 * the previous segment's, each with a probability in [0, 1] and not ending before it starts.
 * With `batched`, it transcribes once more in batches (batch_size 2: faster-whisper's
 * BatchedInferencePipeline, its detector on), with the same checks and words with `words`
 * (one more 30 s window: run-examples.sh runs it natively, not under Valgrind).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tessel.h"

/* Prints the words of the transcription just made (with word timestamps) under each of its
 * `n_segments` segments; 1 when they are inconsistent. */
static int print_words(tessel_transcriber *transcriber, const tessel_segment *segments,
                       size_t n_segments) {
    /* Their sizes first, then the words. */
    size_t n_words = 0, words_len = 0;
    tessel_status status =
        tessel_transcriber_words(transcriber, NULL, 0, &n_words, NULL, 0, &words_len);
    if (status != TESSEL_ERR_BUFFER_TOO_SMALL) {
        CHECK(status);
    }
    tessel_word *words = malloc((n_words + 1) * sizeof *words);
    char *text = malloc(words_len + 1);
    if (words == NULL || text == NULL) {
        return 1;
    }
    CHECK(tessel_transcriber_words(transcriber, words, n_words, &n_words, text, words_len + 1,
                                   &words_len));
    int failed = 0;
    size_t next = 0;
    for (size_t i = 0; i < n_segments && !failed; i++) {
        const tessel_segment *s = &segments[i];
        failed |= s->first_word != next || s->first_word + s->n_words > n_words;
        next = s->first_word + s->n_words;
        for (size_t w = s->first_word; !failed && w < next; w++) {
            const tessel_word *word = &words[w];
            printf("    segment %zu [%6.2f -> %6.2f] p=%.4f %.*s\n", i, word->start, word->end,
                   word->probability, (int)word->text_len, text + word->text_offset);
            failed |= word->end < word->start || word->probability < 0.0 ||
                      word->probability > 1.0;
        }
    }
    failed |= next != n_words;
    printf("word timestamps: %zu words in %zu segments%s\n", n_words, n_segments,
           failed ? ", INCONSISTENT" : "");
    free(text);
    free(words);
    return failed;
}

/* Transcribes `samples` as `options` say into arrays it allocates, `*segments` and `*text`
 * (the caller frees both): a first call without arrays reports their sizes and keeps the
 * transcript, and the retry with arrays of those sizes copies it. 1 when they cannot be
 * allocated. */
static int transcribe_all(tessel_transcriber *transcriber, const float *samples,
                          size_t n_samples, const tessel_transcribe_options *options,
                          tessel_segment **segments, size_t *n_segments, char **text,
                          size_t *text_len) {
    tessel_status status = tessel_transcribe(transcriber, samples, n_samples, options, NULL, 0,
                                             n_segments, NULL, 0, text_len);
    if (status != TESSEL_ERR_BUFFER_TOO_SMALL) {
        CHECK(status);
    }
    *segments = malloc((*n_segments + 1) * sizeof **segments);
    *text = malloc(*text_len + 1);
    if (*segments == NULL || *text == NULL) {
        return 1;
    }
    CHECK(tessel_transcribe(transcriber, samples, n_samples, options, *segments, *n_segments,
                            n_segments, *text, *text_len + 1, text_len));
    return 0;
}

/* Transcribes `samples` in batches (faster-whisper's batched defaults: the speech the detector
 * finds packed into chunks of up to 30 s; here greedy, with timestamps, two chunks decoded
 * together; with `words`, timing words too); 1 unless it gets segments with ordered,
 * non-negative bounds in the file's times (and consistent words). */
static int transcribe_batched(tessel_transcriber *transcriber, const float *samples,
                              size_t n_samples, int words) {
    tessel_transcribe_options options = tessel_transcribe_options_batched();
    options.beam = 1;
    options.batch_size = 2;
    options.timestamps = true;
    options.word_timestamps = words != 0;
    tessel_segment *segments = NULL;
    char *text = NULL;
    size_t n_segments = 0, text_len = 0;
    if (transcribe_all(transcriber, samples, n_samples, &options, &segments, &n_segments, &text,
                       &text_len)) {
        return 1;
    }
    int failed = n_segments == 0;
    for (size_t i = 0; i < n_segments; i++) {
        printf("batched [%6.2f -> %6.2f] %.*s\n", segments[i].start, segments[i].end,
               (int)segments[i].text_len, text + segments[i].text_offset);
        failed |= segments[i].start < 0.0 || segments[i].start > segments[i].end;
    }
    if (words) {
        failed |= print_words(transcriber, segments, n_segments);
    }
    printf("batched: %zu segments, %zu bytes of text%s\n", n_segments, text_len,
           failed ? ", INCONSISTENT" : "");
    free(text);
    free(segments);
    return failed;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The samples of a 16 kHz mono 16-bit PCM WAV file as floats in [-1, 1); NULL on failure. */
static float *read_wav(const char *path, size_t *n) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        perror(path);
        return NULL;
    }
    unsigned char header[12];
    float *samples = NULL;
    if (fread(header, 1, 12, file) != 12 || memcmp(header, "RIFF", 4) != 0 ||
        memcmp(header + 8, "WAVE", 4) != 0) {
        goto done;
    }
    unsigned char chunk[8];
    int format_ok = 0;
    while (fread(chunk, 1, 8, file) == 8) {
        uint32_t size = le32(chunk + 4);
        if (memcmp(chunk, "fmt ", 4) == 0) {
            unsigned char fmt[16];
            if (size < 16 || fread(fmt, 1, 16, file) != 16) {
                goto done;
            }
            format_ok = fmt[0] == 1 && fmt[2] == 1 && le32(fmt + 4) == 16000 && fmt[14] == 16;
            fseek(file, (long)(size - 16 + (size & 1)), SEEK_CUR);
        } else if (memcmp(chunk, "data", 4) == 0 && format_ok) {
            *n = size / 2;
            samples = malloc(*n * sizeof *samples + 1);
            unsigned char pair[2];
            for (size_t i = 0; samples != NULL && i < *n; i++) {
                if (fread(pair, 1, 2, file) != 2) {
                    free(samples);
                    samples = NULL;
                    break;
                }
                samples[i] = (float)(int16_t)(pair[0] | pair[1] << 8) / 32768.0f;
            }
            goto done;
        } else {
            fseek(file, (long)(size + (size & 1)), SEEK_CUR);
        }
    }
done:
    fclose(file);
    if (samples == NULL) {
        fprintf(stderr, "%s: not a 16 kHz mono 16-bit PCM WAV file\n", path);
    }
    return samples;
}

int main(int argc, char **argv) {
    int words_too = 0, batched_too = 0;
    for (int i = 3; i < argc; i++) {
        words_too |= strcmp(argv[i], "words") == 0;
        batched_too |= strcmp(argv[i], "batched") == 0;
    }
    if (argc < 3 || argc - 3 != words_too + batched_too) {
        fprintf(stderr, "usage: %s MODEL_DIR WAV [words] [batched]\n", argv[0]);
        return 2;
    }
    size_t n_samples = 0;
    float *samples = read_wav(argv[2], &n_samples);
    if (samples == NULL) {
        return 1;
    }
    tessel_transcriber *transcriber = NULL;
    CHECK(tessel_transcriber_load(argv[1], 1, 1, -1, &transcriber));
    tessel_transcribe_options options = tessel_transcribe_options_default();
    options.beam = 1;
    /* With `words`, the transcriptions of the whole clip time their words too. */
    options.word_timestamps = words_too;

    /* A language the model cannot be told ("xx" is none of Whisper's) is refused. */
    size_t n_segments = 0, text_len = 0;
    options.language = "xx";
    tessel_status status = tessel_transcribe(transcriber, samples, n_samples, &options, NULL, 0,
                                             &n_segments, NULL, 0, &text_len);
    printf("refused as expected: %s: %s\n", tessel_status_name(status), tessel_last_error());
    if (status != TESSEL_ERR_ARGUMENT) {
        return 1;
    }
    options.language = NULL;

    /* Arrays sized from a first call without them (see transcribe_all). */
    tessel_segment *segments = NULL;
    char *text = NULL;
    if (transcribe_all(transcriber, samples, n_samples, &options, &segments, &n_segments, &text,
                       &text_len)) {
        return 1;
    }
    printf("%.2f s of audio: %zu segments, %zu bytes of text\n", (double)n_samples / 16000.0,
           n_segments, text_len);
    for (size_t i = 0; i < n_segments; i++) {
        printf("[%6.2f -> %6.2f] %.*s\n", segments[i].start, segments[i].end,
               (int)segments[i].text_len, text + segments[i].text_offset);
    }
    int failed = options.word_timestamps ? print_words(transcriber, segments, n_segments) : 0;

    /* The same file by path: the library reads and resamples it. */
    tessel_segment *by_path = malloc((n_segments + 1) * sizeof *by_path);
    char *by_path_text = malloc(text_len + 1);
    size_t n_by_path = 0, len_by_path = 0;
    if (by_path == NULL || by_path_text == NULL) {
        return 1;
    }
    CHECK(tessel_transcribe_wav(transcriber, argv[2], &options, by_path, n_segments + 1,
                                &n_by_path, by_path_text, text_len + 1, &len_by_path));
    failed |= n_segments == 0 || n_by_path != n_segments || len_by_path != text_len ||
                 strcmp(text, by_path_text) != 0 ||
                 memcmp(segments, by_path, n_segments * sizeof *segments) != 0;
    printf("by path: %s\n", failed ? "DIFFERENT" : "the same segments");

    /* Voice activity detection first: only the speech is transcribed, and the segments come
     * back in the file's times. */
    options.vad.enabled = true;
    options.vad.min_silence_duration_ms = 500;
    options.word_timestamps = false;
    tessel_segment *speech = NULL;
    char *speech_text = NULL;
    size_t n_speech = 0, speech_len = 0;
    if (transcribe_all(transcriber, samples, n_samples, &options, &speech, &n_speech,
                       &speech_text, &speech_len)) {
        return 1;
    }
    failed |= n_speech == 0;
    for (size_t i = 0; i < n_speech; i++) {
        failed |= speech[i].start < 0.0 || speech[i].start > speech[i].end;
    }
    printf("with voice activity detection: %zu segments, %zu bytes of text\n", n_speech,
           speech_len);

    if (batched_too) {
        failed |= transcribe_batched(transcriber, samples, n_samples, words_too);
    }

    free(speech_text);
    free(speech);
    free(by_path_text);
    free(by_path);
    free(text);
    free(segments);
    free(samples);
    CHECK(tessel_transcriber_free(transcriber));
    return failed;
}
