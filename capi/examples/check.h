/*
 * check.h: the examples' one way to stop at a failing tessel call.
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

#endif
