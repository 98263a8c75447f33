/* The decoder job (Lingvo's Decoder, job decoder_<dataset>) for the MT tasks
 * (mt.model.TransformerModel, mt.model.RNMTModel: any task class with mt_decode ops,
 * models/mt.h): follows <logdir>/train's checkpoints as the evaler does (runners/follower.h), and for
 * each one decodes the dataset's eval pass with beam search (task.decoder.beam_search,
 * task.decoder.target_seq_len; models/beam_search.h), writing
 * <logdir>/decoder_<ds>/decoder_out_%09d (per sentence: source, reference and the top
 * hyps with their scores, as text), score-%08d.txt and events with corpus_bleu (Lingvo's
 * BleuScorer, a fraction), sacrebleu (x100), num_samples_in_batch and examples/sec,
 * params.txt and processed_ckpts.txt. Text comes from input.tokenizer (required).
 *
 * decode_text: translate raw lines (a file or "-" for stdin) with one checkpoint (the
 * given one or the latest) to out, one output line per input line, flushed per line. An
 * empty line gives an empty line; a line that is not valid UTF-8 gives an empty line and
 * a message on stderr; a line longer than input.source_max_length pieces (</s> included)
 * is truncated to it, with a message on stderr. */
#ifndef LV_RUNNERS_DECODER_H
#define LV_RUNNERS_DECODER_H

#include <stdbool.h>
#include <stdio.h>

#include "base/status.h"
#include "params/params.h"

typedef struct lv_decoder_options {
  const char *dataset;     /* "Test" */
  bool once;
  const char *checkpoint;  /* with once / decode_text: a prefix or directory; NULL = latest */
  double max_poll_secs;
  double timeout_secs;
  const char *decode_text; /* NULL: the decoder job; else a file name or "-" */
  FILE *out;               /* decode_text's output; NULL = stdout */
} lv_decoder_options;

lv_status lv_decoder_run(const lv_params *cfg, const lv_decoder_options *opt);

#endif
