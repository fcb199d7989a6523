/*
 * batch.c: a stream of requests decoded together through tessel's batch calls, each result
 * checked against a plain session.
 *
 *   batch MODEL
 *
 * MODEL is the numbers model's directory (assets/numbers), loaded with f32 weights (f16
 * products round apart between one row and many, so only f32 gives equal score bits). The
 * example serves nine number texts through a batch of three slots: whenever a slot is free
 * it reads the slot's result and gives it the next text, which joins the running ones at the
 * next step (continuous batching). Every text is then decoded alone by a session with the
 * same options; the example fails unless every hypothesis has the same tokens and the same
 * score bits, and unless the batch's misuse refusals say what is wrong. (Beam search on this
 * small model often ranks a hypothesis that stops early best, as tessel_generate does.)
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tessel.h"

#define SLOTS 3
#define MAX_IDS 128
#define MAX_HYPOTHESES 4
#define MAX_TOKENS 16

static const char *const texts[] = {
    "seven",
    "four hundred and twelve thousand and seven",
    "nineteen",
    "two million, three hundred thousand",
    "sixty-six",
    "nine hundred ninety-nine million, eight hundred thousand and one",
    "forty two",
    "three thousand and forty",
    "one hundred",
};
#define TEXTS (sizeof texts / sizeof texts[0])

/* One search's hypotheses, best first. */
typedef struct {
    size_t count;
    size_t lens[MAX_HYPOTHESES];
    uint32_t tokens[MAX_HYPOTHESES][MAX_TOKENS];
    float scores[MAX_HYPOTHESES];
} result;

/* The numbers vocabulary's source ids of a lower-case text: ' ' 2, ',' 3, '-' 4, 'a'..'z'
 * 5..30 (assets/numbers/vocab.json). */
static size_t source_ids(const char *text, uint32_t *ids) {
    size_t len = 0;
    for (const char *c = text; *c != '\0' && len < MAX_IDS; c++) {
        if (*c == ' ') {
            ids[len++] = 2;
        } else if (*c == ',') {
            ids[len++] = 3;
        } else if (*c == '-') {
            ids[len++] = 4;
        } else if (*c >= 'a' && *c <= 'z') {
            ids[len++] = 5 + (uint32_t)(*c - 'a');
        } else {
            fprintf(stderr, "'%c' is not in the numbers vocabulary\n", *c);
            exit(1);
        }
    }
    return len;
}

/* Text i's search: greedy for even lines, 3 beams for odd ones. */
static tessel_generate_options options_for(size_t i) {
    tessel_generate_options options = tessel_generate_options_default();
    options.beam = i % 2 == 0 ? 1 : 3;
    return options;
}

static void read_batch_slot(tessel_batch *batch, size_t slot, result *out) {
    CHECK(tessel_batch_finished(batch, slot, &out->count));
    for (size_t h = 0; h < out->count; h++) {
        CHECK(tessel_batch_hypothesis(batch, slot, h, out->tokens[h], MAX_TOKENS, &out->lens[h],
                                      &out->scores[h]));
    }
}

static void read_session(tessel_session *session, size_t count, result *out) {
    out->count = count;
    for (size_t h = 0; h < count; h++) {
        CHECK(tessel_hypothesis(session, h, out->tokens[h], MAX_TOKENS, &out->lens[h],
                                &out->scores[h]));
    }
}

/* Serves every text through the batch's slots; returns the steps run. */
static size_t serve(tessel_batch *batch, result *results) {
    long held[SLOTS] = {-1, -1, -1};
    size_t next = 0, steps = 0, running = 0;
    uint32_t ids[MAX_IDS];
    for (;;) {
        for (size_t slot = 0; slot < SLOTS; slot++) {
            bool busy = false;
            CHECK(tessel_batch_running(batch, slot, &busy));
            if (busy) {
                continue;
            }
            if (held[slot] >= 0) {
                read_batch_slot(batch, slot, &results[held[slot]]);
                held[slot] = -1;
            }
            if (next < TEXTS) {
                size_t len = source_ids(texts[next], ids);
                tessel_generate_options options = options_for(next);
                CHECK(tessel_batch_encode(batch, slot, ids, len));
                CHECK(tessel_batch_submit(batch, slot, &options));
                held[slot] = (long)next++;
                running += 1;
            }
        }
        if (running == 0) {
            return steps;
        }
        CHECK(tessel_batch_step(batch, &running));
        steps += 1;
    }
}

/* Whether two results have the same tokens and score bits. */
static bool same(const result *a, const result *b) {
    if (a->count != b->count) {
        return false;
    }
    for (size_t h = 0; h < a->count; h++) {
        if (a->lens[h] != b->lens[h] ||
            memcmp(a->tokens[h], b->tokens[h], a->lens[h] * sizeof(uint32_t)) != 0 ||
            memcmp(&a->scores[h], &b->scores[h], sizeof(float)) != 0) {
            return false;
        }
    }
    return true;
}

static void print_digits(const result *r) {
    for (size_t t = 0; t < r->lens[0]; t++) {
        if (r->tokens[0][t] >= 3) {
            putchar('0' + (int)(r->tokens[0][t] - 3));
        }
    }
}

/* Fails unless `status` is `want`; prints the refusal's message. */
static int refused(tessel_status status, tessel_status want, const char *what) {
    printf("refused as expected (%s): %s: %s\n", what, tessel_status_name(status),
           tessel_last_error());
    if (status != want) {
        fprintf(stderr, "%s: expected %s\n", what, tessel_status_name(want));
        return 1;
    }
    return 0;
}

/* A few misuses of an idle batch, each a status with a message. */
static int misuse(tessel_batch *batch) {
    uint32_t ids[MAX_IDS];
    size_t len = source_ids("twelve", ids), running = 0;
    int failures = 0;
    failures += refused(tessel_batch_encode(batch, SLOTS, ids, len), TESSEL_ERR_ARGUMENT,
                        "a slot past the batch");
    failures += refused(tessel_batch_step(batch, &running), TESSEL_ERR_RUN, "nothing running");
    CHECK(tessel_batch_encode(batch, 0, ids, len));
    CHECK(tessel_batch_submit(batch, 0, NULL));
    failures += refused(tessel_batch_submit(batch, 0, NULL), TESSEL_ERR_RUN,
                        "a slot still running");
    do {
        CHECK(tessel_batch_step(batch, &running));
    } while (running > 0);
    failures += refused(tessel_batch_encode((tessel_batch *)NULL, 0, ids, len), TESSEL_ERR_NULL,
                        "a NULL batch");
    return failures;
}

int main(int argc, char **argv) {
    require_args(argc, argv, 1, "MODEL_DIR");
    tessel_load_options load = tessel_load_options_default();
    load.weights = "f32";
    tessel_model *model = NULL;
    CHECK(tessel_model_load_dir(argv[1], &load, &model));
    tessel_limits limits = {0};
    limits.max_beam = 3;

    tessel_batch *batch = NULL;
    CHECK(tessel_batch_new(model, &limits, SLOTS, &batch));
    static result batched[TEXTS], alone[TEXTS];
    size_t steps = serve(batch, batched);
    printf("%zu texts through %d slots in %zu batch steps\n", TEXTS, SLOTS, steps);
    int failures = misuse(batch);
    CHECK(tessel_batch_free(batch));

    tessel_session *session = NULL;
    CHECK(tessel_session_new(model, &limits, &session));
    uint32_t ids[MAX_IDS];
    for (size_t i = 0; i < TEXTS; i++) {
        tessel_generate_options options = options_for(i);
        size_t count = 0;
        CHECK(tessel_encode(session, ids, source_ids(texts[i], ids)));
        CHECK(tessel_generate(session, &options, &count));
        read_session(session, count, &alone[i]);
        bool ok = same(&batched[i], &alone[i]);
        printf("beam %zu %-66s -> ", options.beam, texts[i]);
        print_digits(&batched[i]);
        printf(" (%zu hypotheses, %s)\n", batched[i].count,
               ok ? "as a session" : "DIFFERS from a session");
        failures += ok ? 0 : 1;
    }
    CHECK(tessel_session_free(session));
    CHECK(tessel_model_release(model));
    return failures == 0 ? 0 : 1;
}
