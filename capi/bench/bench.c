/*
 * bench.c: per-token time of the numbers model through the C API (the C side of
 * capi/bench/run.sh, whose Rust side is capi/examples/bench_rust.rs; both do the same work).
 *
 *   bench TSV LINES ROUNDS
 *
 * Reads the first LINES lines of TSV (words first). Each round times, over every line:
 *   read:   tessel_numbers_read (tokenise, encode, greedy search, detokenise), per generated
 *           token (the search's steps, counted by a step callback outside the timed rounds);
 *   decode: after the line is encoded, a greedy loop of tessel_decode_step from BOS with an
 *           argmax in C until EOS or the step limit, per decode step.
 * Prints the minimum and the median over ROUNDS of each, in nanoseconds per token (on a shared
 * machine the minimum is the least disturbed round).
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessel.h"

#define CHECK(call)                                                                           \
    do {                                                                                      \
        tessel_status status_ = (call);                                                       \
        if (status_ != TESSEL_OK) {                                                           \
            fprintf(stderr, "%s: %s (%s)\n", #call, tessel_status_name(status_),             \
                    tessel_last_error());                                                     \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

enum { MAX_LINES = 256, WORDS = 256, MAX_ROUNDS = 1000, VOCAB_CAP = 64 };

static char words[MAX_LINES][WORDS];

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts `values`; returns the median. */
static double median(double *values, int n) {
    qsort(values, (size_t)n, sizeof values[0], compare);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

static void count_step(void *user_data, tessel_step *step) {
    (void)step;
    *(size_t *)user_data += 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s TSV LINES ROUNDS\n", argv[0]);
        return 2;
    }
    int lines = atoi(argv[2]), rounds = atoi(argv[3]);
    if (lines < 1 || lines > MAX_LINES || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "LINES in 1..%d, ROUNDS in 1..%d\n", MAX_LINES, MAX_ROUNDS);
        return 2;
    }
    FILE *file = fopen(argv[1], "r");
    if (file == NULL) {
        perror(argv[1]);
        return 1;
    }
    int n = 0;
    char line[WORDS];
    while (n < lines && fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\t\n")] = '\0';
        memcpy(words[n++], line, strlen(line) + 1);
    }
    fclose(file);

    tessel_model *model = NULL;
    CHECK(tessel_model_load_numbers(&model));
    tessel_model_info info;
    CHECK(tessel_model_get_info(model, &info));
    if (info.tgt_vocab > VOCAB_CAP) {
        return 1;
    }
    tessel_limits limits = {0};
    limits.max_beam = 1;
    tessel_session *session = NULL;
    CHECK(tessel_session_new(model, &limits, &session));
    CHECK(tessel_session_get_limits(session, &limits));

    /* Tokens each line generates, counted once outside the timed rounds. */
    char digits[32];
    size_t len = 0, read_tokens = 0;
    tessel_generate_options counting = tessel_generate_options_default();
    counting.on_step = count_step;
    counting.user_data = &read_tokens;
    for (int i = 0; i < n; i++) {
        CHECK(tessel_numbers_read(session, words[i], digits, sizeof digits, &len));
        CHECK(tessel_generate(session, &counting, &len));
    }

    static double read_ns[MAX_ROUNDS], decode_ns[MAX_ROUNDS];
    float logits[VOCAB_CAP];
    for (int r = 0; r < rounds; r++) {
        double start = now_ns();
        for (int i = 0; i < n; i++) {
            CHECK(tessel_numbers_read(session, words[i], digits, sizeof digits, &len));
        }
        read_ns[r] = (now_ns() - start) / (double)read_tokens;

        double decode_time = 0.0;
        size_t steps = 0;
        for (int i = 0; i < n; i++) {
            CHECK(tessel_numbers_read(session, words[i], digits, sizeof digits, &len));
            CHECK(tessel_reset_decoder(session));
            uint32_t token = info.bos_id;
            double t0 = now_ns();
            for (size_t p = 0; p < limits.max_tgt_len; p++) {
                CHECK(tessel_decode_step(session, &token, 1, logits, VOCAB_CAP, &len));
                uint32_t best = 0;
                for (uint32_t v = 1; v < (uint32_t)len; v++) {
                    if (logits[v] > logits[best]) {
                        best = v;
                    }
                }
                steps += 1;
                token = best;
                if (token == info.eos_id) {
                    break;
                }
            }
            decode_time += now_ns() - t0;
        }
        decode_ns[r] = decode_time / (double)steps;
    }
    double read_median = median(read_ns, rounds), decode_median = median(decode_ns, rounds);
    printf("c read_ns_per_token %.1f decode_ns_per_step %.1f min %.1f %.1f\n", read_median,
           decode_median, read_ns[0], decode_ns[0]);
    CHECK(tessel_session_free(session));
    CHECK(tessel_model_release(model));
    return 0;
}
