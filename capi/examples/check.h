/*
 * check.h: what the C examples share: one way to stop at a failing tessel call, the check
 * of their arguments' count, and the optional STRIDE argument.
 */
#ifndef TESSEL_EXAMPLES_CHECK_H
#define TESSEL_EXAMPLES_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "tessel.h"

/* Prints the failing call and this thread's last error, then exits. */
#define CHECK(call)                                                                           \
    do {                                                                                      \
        tessel_status status_ = (call);                                                       \
        if (status_ != TESSEL_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,               \
                    tessel_status_name(status_), tessel_last_error());                        \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Prints the usage line and exits with status 2 unless there are at least `count` arguments
 * after the program's name. */
static inline void require_args(int argc, char **argv, int count, const char *usage) {
    if (argc < count + 1) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        exit(2);
    }
}

/* The STRIDE argument, argv[index]: 1 when it is absent or below 1. */
static inline long stride_arg(int argc, char **argv, int index) {
    long stride = argc > index ? strtol(argv[index], NULL, 10) : 1;
    return stride < 1 ? 1 : stride;
}

#endif
