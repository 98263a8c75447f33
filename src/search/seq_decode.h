/* The decoder job of the sequence-to-sequence tasks (mt.model.TransformerModel,
 * mt.model.RNMTModel, punctuator.model.RNMTModel): beam search (search/beam_search.h,
 * task.decoder.beam_search) over a task's incremental decoder, the hyps turned into text
 * with input.tokenizer, and Lingvo's MT decoder metrics. A task class fills its decoder
 * hooks with these functions (LV_SEQ_DECODE_HOOKS) and gives its lv_seq_decode_ops.
 *
 * What the decoder job gets from them, per checkpoint:
 *   metrics       corpus_bleu (Lingvo's BleuScorer, a fraction), sacrebleu (x100),
 *                 num_samples_in_batch; with the punctuator's data also its marks
 *                 (exact_match, precision_X, recall_X, f1_X: models/punctuator.h).
 *   decoder_out   per sentence the key "example N" (N counts the checkpoint's sentences)
 *                 and the lines "src: ...", "ref: ..." and "hyp h: score S: ..." per hyp.
 * Batches whose search would hold more than 2 GiB (the ops' row_bytes estimate) are
 * searched in parts of fewer sentences. The search runs over the task's decoder and its
 * other scorers (t->scorers: fused language models, search/lm_fusion.h), each step adding
 * their weighted log-probs to the model's; their per-hyp state is outside that estimate.
 *
 * Interactive decoding takes kind "text": a line is checked for UTF-8 (a bad line gives
 * an empty output and a warning), normalised as PunctuatorInput's sources are for the
 * punctuator, encoded with input.tokenizer, truncated to input.source_max_length pieces
 * (with a warning), and decoded; the output line is the top hyp's text. */
#ifndef LV_SEARCH_SEQ_DECODE_H
#define LV_SEARCH_SEQ_DECODE_H

#include "search/beam_search.h"
#include "input/tokenizer.h"
#include "models/task.h"

/* A task's incremental decoder: encode a batch of sources once, then step every
 * hypothesis of a beam search (search/beam_search.h's step callback). All tensors live
 * in the caller's graph, which must not be reset between begin and end. */
struct lv_seq_decode_ops {
  /* Vocabulary size of the decoder's softmax (the width of log_probs). */
  int64_t (*vocab_size)(const lv_task *t);
  /* Whether step writes attention probabilities (which the coverage penalty needs). */
  bool atten_probs;
  /* About how many bytes of graph memory one hyp of a search of target_seq_len steps
   * over batch b (host) holds until the search ends (the parts a batch is searched in are
   * sized by it). */
  int64_t (*row_bytes)(const lv_task *t, const lv_batch *b, int64_t target_seq_len);
  /* Encodes the B examples of batch b (host memory: the decoder copies onto g what it
   * reads; eval mode) into a new decoder state (*state, released by end, also after an
   * error). *atten_len: the attention positions of each step's atten_probs row;
   * atten_lens [B]: how many of them are real for each example (the coverage penalty). */
  lv_status (*begin)(lv_task *t, lv_graph *g, const lv_batch *b, int64_t *atten_len, int32_t *atten_lens,
                     void **state);
  /* One step for n rows (n a multiple of B; row i decodes example i % B): the per-row
   * state is first gathered by parent [n] (rows of the previous step; NULL: each row
   * starts from or continues its own row, which needs the same n), then step_ids [n] are
   * consumed; log_probs [n, V] (host) receive the next token's log-probabilities and,
   * when atten_probs is true and the pointer is not NULL, atten_probs [n, atten_len] the
   * attention that produced them. */
  lv_status (*step)(void *state, int n, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                    float *atten_probs);
  void (*end)(void *state);
};

/* The beam search of task.decoder.beam_search and task.decoder.target_* of cfg (an error
 * names the missing key). */
/* The memory a search may hold (row_bytes times its hyps); a larger batch is searched in
 * parts. Interactive decoders bound their batches of lines by it too. */
#define LV_SEQ_SEARCH_BUDGET_BYTES ((int64_t)2 << 30)
lv_status lv_seq_search_params(const lv_params *cfg, lv_beam_search_params *bp);
/* Beam search (bp, over a softmax of vocab) through t's seq_decode ops for the first n
 * examples of host batch b, whose per-example tensors have `rows` rows (n <= rows; the
 * rest are padding rows), in parts the ops' row_bytes keep under 2 GiB: puts into out
 * topk_ids int32 [n * H, target_seq_len], topk_lens int32 [n * H] (EOS included) and
 * topk_scores float [n * H], H = num_hyps_per_beam, hyps of example i in rows
 * [i * H, (i + 1) * H) best first. Tasks that keep their own decode state (asr.h) call
 * it; lv_seq_decode is it over src.ids. */
lv_status lv_seq_beam_decode(lv_task *t, const lv_beam_search_params *bp, int vocab, lv_graph *g, const lv_batch *b,
                             int64_t rows, int64_t n, lv_decode_out *out);
/* Helpers of the tasks' post-processing: the unpadded positions of row r of paddings
 * [rows, width] (host), and a row of ids as text up to len - 1 (its final </s> dropped:
 * Lingvo's topk_lens - 1), at most width ids (malloc'd). */
int lv_seq_row_len(const lv_tensor *paddings, int64_t r);
lv_status lv_seq_row_text(const lv_tokenizer *tok, const int32_t *row, int width, int len, char **out);
/* Borrows into out each of batch b's tensors named in keys[0..n) that b has (what the
 * post-processing reads of the batch). */
lv_status lv_seq_keep_batch_keys(lv_decode_out *out, const lv_batch *b, const char *const *keys, size_t n);

/* The hooks. decoder_setup reads task.decoder.beam_search / target_* and the tokenizer;
 * lv_seq_decoder_setup_punct also reports the punctuator's metrics and normalises typed
 * lines as PunctuatorInput does (lv_seq_decoder_setup does so when input.cls is
 * PunctuatorInput). */
lv_status lv_seq_decoder_setup(lv_task *t, const lv_params *cfg);
lv_status lv_seq_decoder_setup_punct(lv_task *t, const lv_params *cfg);
lv_status lv_seq_create_decoder_metrics(lv_task *t, lv_metric_set *metrics);
lv_status lv_seq_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out);
lv_status lv_seq_post_process_decode_out(lv_task *t, const lv_decode_out *dec_out, lv_metric_set *metrics,
                                         lv_kv_list *out);
lv_status lv_seq_decoder_report(lv_task *t, const lv_metric_set *metrics, char **headline, char **detail);
lv_status lv_seq_line_describe(lv_task *t, const char *kind, const char **verb, const char **note);
lv_status lv_seq_line_to_batch(lv_task *t, const char *kind, const char *line, size_t len, int64_t lineno,
                               lv_batch *b, bool *empty);
lv_status lv_seq_decode_out_to_line(lv_task *t, const lv_decode_out *dec_out, char **line);
lv_status lv_seq_decode_out_nbest(lv_task *t, const lv_decode_out *dec_out, int i, int k, char **texts, float *scores,
                                  int *n);
/* The decode_out_nbest of example row (-1 or a NULL dec_out: none) of dec_out's topk_ids / topk_lens /
 * topk_scores, H hyps per example, as text with tok. */
lv_status lv_seq_nbest(const lv_tokenizer *tok, int H, const lv_decode_out *dec_out, int64_t row, int k, char **texts,
                       float *scores, int *n);

/* The lv_task_class fields of a sequence task that decodes with ops (setup: one of the
 * two setup functions above). */
#define LV_SEQ_DECODE_HOOKS(setup, ops)                                                                   \
  .decoder_setup = (setup), .create_decoder_metrics = lv_seq_create_decoder_metrics,                   \
  .decode = lv_seq_decode, .post_process_decode_out = lv_seq_post_process_decode_out,                 \
  .decoder_report = lv_seq_decoder_report, .line_describe = lv_seq_line_describe,                     \
  .line_to_batch = lv_seq_line_to_batch, .decode_out_to_line = lv_seq_decode_out_to_line,             \
  .decode_out_nbest = lv_seq_decode_out_nbest, .seq_decode = (ops)

#endif
