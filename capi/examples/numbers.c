/*
 * numbers.c: the numbers model (English number words to digits) through tessel's C API.
 *
 *   numbers MODEL TSV [STRIDE]
 *
 * MODEL is "embedded" (the model compiled into the library) or a model directory with a
 * numbers vocab.json (assets/numbers). The example reads a few numbers, shows the beam-search
 * alternatives of one with a step callback, shows two refusals' messages (a character the
 * model does not read, a callback that leaves only NaN logits), then reads every
 * STRIDE-th line of TSV (assets/numbers/pytorch_greedy.tsv: words, PyTorch's greedy digits,
 * its decision margin) and fails unless every line PyTorch decided by a margin above 1e-3
 * reads the same.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tessel.h"

/* Counts the search's steps and the live beams it saw. */
typedef struct {
    size_t steps;
    size_t widest;
} step_stats;

static void on_step(void *user_data, tessel_step *step) {
    step_stats *stats = user_data;
    stats->steps += 1;
    if (step->beams > stats->widest) {
        stats->widest = step->beams;
    }
}

/* Leaves no finite logit: the search refuses to rank NaNs and blames the callback. */
static void poison(void *user_data, tessel_step *step) {
    (void)user_data;
    for (size_t i = 0; i < step->beams * step->vocab; i++) {
        step->logits[i] = NAN;
    }
}

/* Reads the TSV's lines; returns the number of mismatches on decided lines. */
static int check_tsv(tessel_session *session, const char *path, long stride, size_t *read) {
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        perror(path);
        exit(1);
    }
    char line[512];
    char digits[32];
    long index = 0;
    int mismatches = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        if (index++ % stride != 0) {
            continue;
        }
        char *words = strtok(line, "\t");
        char *expected = strtok(NULL, "\t");
        char *margin = strtok(NULL, "\t\n");
        if (words == NULL || expected == NULL || margin == NULL) {
            fprintf(stderr, "%s: line %ld is not words<TAB>digits<TAB>margin\n", path, index);
            exit(1);
        }
        size_t len = 0;
        CHECK(tessel_numbers_read(session, words, digits, sizeof digits, &len));
        *read += 1;
        if (strtod(margin, NULL) > 1e-3 && strcmp(digits, expected) != 0) {
            fprintf(stderr, "mismatch: \"%s\" -> %s, PyTorch %s\n", words, digits, expected);
            mismatches += 1;
        }
    }
    fclose(file);
    return mismatches;
}

int main(int argc, char **argv) {
    require_args(argc, argv, 2, "MODEL|embedded TSV [STRIDE]");
    long stride = stride_arg(argc, argv, 3);

    tessel_model *model = NULL;
    if (strcmp(argv[1], "embedded") == 0) {
        CHECK(tessel_model_load_numbers(&model));
    } else {
        CHECK(tessel_model_load_dir(argv[1], NULL, &model));
    }
    tessel_model_info info;
    CHECK(tessel_model_get_info(model, &info));
    const char *isa = NULL;
    CHECK(tessel_isa_name(&isa));
    printf("tessel %s, ISA %s, model: %zu source / %zu target symbols, %zu weight bytes\n",
           tessel_version(), isa, info.src_vocab, info.tgt_vocab, info.weight_bytes);

    /* Plan for beams of 3 and the model's lengths; the arena is allocated here, once. */
    tessel_limits limits = {0};
    limits.max_beam = 3;
    size_t arena = 0;
    CHECK(tessel_session_arena_bytes(model, &limits, &arena));
    tessel_session *session = NULL;
    CHECK(tessel_session_new(model, &limits, &session));
    printf("session arena: %zu bytes\n", arena);

    const char *examples[] = {"four hundred and twelve thousand and seven", "nineteen",
                              "two million, three hundred thousand"};
    char digits[32];
    size_t len = 0;
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        CHECK(tessel_numbers_read(session, examples[i], digits, sizeof digits, &len));
        printf("%-45s -> %s\n", examples[i], digits);
    }

    /* The last text is still encoded: search it again with 3 beams and a step callback. */
    step_stats stats = {0, 0};
    tessel_generate_options options = tessel_generate_options_default();
    options.beam = 3;
    options.on_step = on_step;
    options.user_data = &stats;
    size_t count = 0;
    CHECK(tessel_generate(session, &options, &count));
    printf("beam 3: %zu hypotheses after %zu steps (up to %zu live beams)\n", count,
           stats.steps, stats.widest);
    for (size_t i = 0; i < count; i++) {
        uint32_t tokens[16];
        float score = 0.0f;
        CHECK(tessel_hypothesis(session, i, tokens, 16, &len, &score));
        printf("  %zu: score %8.4f, ids", i, (double)score);
        for (size_t t = 0; t < len; t++) {
            printf(" %u", tokens[t]);
        }
        printf("\n");
    }

    /* A refusal: a character the model does not read. The session stays usable. */
    tessel_status status = tessel_numbers_read(session, "forty-2", digits, sizeof digits, &len);
    printf("refused as expected: %s: %s\n", tessel_status_name(status), tessel_last_error());
    if (status != TESSEL_ERR_ARGUMENT) {
        return 1;
    }
    /* A callback that leaves only NaN logits: TESSEL_ERR_ARGUMENT, no hypothesis. */
    options.on_step = poison;
    status = tessel_generate(session, &options, &count);
    printf("refused as expected: %s: %s\n", tessel_status_name(status), tessel_last_error());
    if (status != TESSEL_ERR_ARGUMENT || count != 0) {
        return 1;
    }

    size_t read = 0;
    int mismatches = check_tsv(session, argv[2], stride, &read);
    printf("%zu lines of %s read (every %ld), %d differ from PyTorch's decided greedy output\n",
           read, argv[2], stride, mismatches);

    CHECK(tessel_session_free(session));
    CHECK(tessel_model_release(model));
    return mismatches == 0 && read > 0 ? 0 : 1;
}
