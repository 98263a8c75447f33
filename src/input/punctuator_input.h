/* PunctuatorInput's source normalization, shared with bin/decoder's --decode_text. */
#ifndef LV_INPUT_PUNCTUATOR_INPUT_H_
#define LV_INPUT_PUNCTUATOR_INPUT_H_

#include <stddef.h>

#include "input/tokenizer.h"

/* Lingvo's Normalize on bytes (tasks/punctuator/input_generator.py): ASCII A-Z
 * lower-cased, every byte of Python's string.punctuation deleted, runs of ASCII white
 * space collapsed to one space and stripped at both ends. Non-ASCII bytes pass through.
 * Idempotent. Appends to out after clearing it (out->n = 0). */
lv_status lv_punctuator_normalize(const char *s, size_t n, lv_tok_str *out);

#endif
