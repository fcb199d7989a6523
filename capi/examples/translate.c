/*
 * translate.c: text to text through tessel's C API.
 *
 *   translate MODEL_DIR SOURCE_LANG TARGET_LANG TEXT [EXPECTED]
 *
 * MODEL_DIR is a translation model directory (Marian, mBART, M2M100/NLLB, T5, CTranslate2)
 * with its tokenizer; SOURCE_LANG and TARGET_LANG are language codes, or "-" for none. The
 * example translates TEXT first into a buffer that is deliberately too small, reads the size
 * the call reports, and retries with a buffer of that size (the translation is kept, not run
 * again); then it shows a refusal. With EXPECTED it fails unless the translation equals it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tessel.h"

static const char *language(const char *arg) {
    return strcmp(arg, "-") == 0 ? NULL : arg;
}

int main(int argc, char **argv) {
    require_args(argc, argv, 4, "MODEL_DIR SOURCE_LANG|- TARGET_LANG|- TEXT [EXPECTED]");
    tessel_translate_options options = tessel_translate_options_default();
    options.source_lang = language(argv[2]);
    options.target_lang = language(argv[3]);
    tessel_translator *translator = NULL;
    CHECK(tessel_translator_load(argv[1], &options, &translator));

    /* A 4-byte buffer: too small for most translations. The call reports the length. */
    char small[4];
    size_t len = 0;
    tessel_status status = tessel_translate(translator, argv[4], small, sizeof small, &len);
    char *out = NULL;
    if (status == TESSEL_ERR_BUFFER_TOO_SMALL) {
        printf("a %zu-byte buffer is too small: the translation needs %zu bytes and a NUL\n",
               sizeof small, len);
        out = malloc(len + 1);
        if (out == NULL) {
            return 1;
        }
        CHECK(tessel_translate(translator, argv[4], out, len + 1, &len));
    } else {
        CHECK(status);
        out = malloc(len + 1);
        if (out == NULL) {
            return 1;
        }
        memcpy(out, small, len + 1);
    }
    printf("%s\n-> %s\n", argv[4], out);

    /* A refusal: NULL text. The translator stays usable. */
    status = tessel_translate(translator, NULL, small, sizeof small, &len);
    printf("refused as expected: %s: %s\n", tessel_status_name(status), tessel_last_error());
    int failed = status != TESSEL_ERR_NULL;

    if (argc > 5 && strcmp(out, argv[5]) != 0) {
        fprintf(stderr, "mismatch: expected %s\n", argv[5]);
        failed = 1;
    }
    free(out);
    CHECK(tessel_translator_free(translator));
    return failed;
}
