/*
 * threads.c: two sessions on two threads over one shared model.
 *
 *   threads TSV [STRIDE]
 *
 * Reads every STRIDE-th line of TSV (words first, tab-separated) once on the main thread, then
 * again on two threads at the same time, each with its own session over the one embedded
 * model, and fails unless all three readings agree. The main thread releases its model
 * reference before the threads start: each session holds its own.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tessel.h"

enum { MAX_LINES = 2048, WORDS = 256, DIGITS = 32 };

static char words[MAX_LINES][WORDS];
static char reference[MAX_LINES][DIGITS];
static size_t lines = 0;

typedef struct {
    tessel_session *session;
    size_t first; /* reads lines first, first + 2, ... */
    size_t differ;
    size_t read;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    char digits[DIGITS];
    size_t len = 0;
    /* Two passes, so that the threads overlap for a while. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = w->first; i < lines; i += 2) {
            CHECK(tessel_numbers_read(w->session, words[i], digits, sizeof digits, &len));
            w->read += 1;
            if (strcmp(digits, reference[i]) != 0) {
                w->differ += 1;
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    require_args(argc, argv, 1, "TSV [STRIDE]");
    long stride = stride_arg(argc, argv, 2);
    FILE *file = fopen(argv[1], "r");
    if (file == NULL) {
        perror(argv[1]);
        return 1;
    }
    char line[WORDS];
    long index = 0;
    while (lines < MAX_LINES && fgets(line, sizeof line, file) != NULL) {
        if (index++ % stride == 0) {
            line[strcspn(line, "\t\n")] = '\0';
            memcpy(words[lines++], line, strlen(line) + 1);
        }
    }
    fclose(file);

    tessel_model *model = NULL;
    CHECK(tessel_model_load_numbers(&model));
    tessel_limits limits = {0};
    limits.max_beam = 1;
    tessel_session *sessions[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        CHECK(tessel_session_new(model, &limits, &sessions[i]));
    }
    /* The sessions keep the model alive. */
    CHECK(tessel_model_release(model));

    size_t len = 0;
    for (size_t i = 0; i < lines; i++) {
        CHECK(tessel_numbers_read(sessions[0], words[i], reference[i], DIGITS, &len));
    }

    worker workers[2] = {{sessions[1], 0, 0, 0}, {sessions[2], 1, 0, 0}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
    }
    size_t differ = workers[0].differ + workers[1].differ;
    printf("%zu lines read on the main thread; %zu + %zu readings on two threads over one "
           "model, %zu differ\n",
           lines, workers[0].read, workers[1].read, differ);
    for (int i = 0; i < 3; i++) {
        CHECK(tessel_session_free(sessions[i]));
    }
    return differ == 0 && lines > 0 ? 0 : 1;
}
