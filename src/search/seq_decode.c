/* The sequence tasks' decoder job: see seq_decode.h. */
#include "search/seq_decode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "input/punctuator_input.h"
#include "input/tokenizer.h"
#include "layers/owner.h"
#include "search/beam_search.h"
#include "metrics/metrics.h"
#include "metrics/punct_metrics.h"
#include "metrics/sacrebleu.h"

/* What decoder_setup reads, kept in the task's decode_state. */
typedef struct seq_decoder {
  lv_beam_search_params bp;
  lv_tokenizer *tok;
  int vocab;
  int max_src;  /* input.source_max_length: pieces of a typed line, </s> included */
  bool punct;   /* the punctuator's metrics and line normalisation */
  int32_t *line_ids; /* [cap] the typed line's batch */
  float *line_pads;  /* [cap] */
  size_t line_cap;
  lv_tensor ids_view, pads_view;
} seq_decoder;

static void seq_decoder_free(void *state) {
  seq_decoder *d = state;
  lv_tokenizer_destroy(d->tok);
  free(d->line_ids);
  free(d->line_pads);
  free(d);
}

static seq_decoder *decoder_of(lv_task *t) {
  LV_ASSERTF(t->decode_state && t->decode_state_free == seq_decoder_free, "%s: decoder_setup has not run",
             t->cls->cls);
  return t->decode_state;
}

lv_status lv_seq_search_params(const lv_params *cfg, lv_beam_search_params *bp) {
  const lv_params *dp = lv_params_sub(cfg, "task.decoder");
  if (!dp || !lv_params_has(dp, "beam_search") || !lv_params_sub(dp, "beam_search"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.beam_search is missing (task.cls is %s)",
                          lv_params_str(cfg, "task.cls"));
  const lv_params *b = lv_params_sub(dp, "beam_search");
  *bp = lv_beam_search_params_default();
  /* The search holds them as int: a value past 2^31 is an error, not its low 32 bits. */
  static const char *const kInts[][2] = {{"task.decoder.beam_search.num_hyps_per_beam", "num_hyps_per_beam"},
                                         {"task.decoder.target_sos_id", "target_sos_id"},
                                         {"task.decoder.target_eos_id", "target_eos_id"},
                                         {"task.decoder.target_seq_len", "target_seq_len"}};
  for (size_t i = 0; i < sizeof kInts / sizeof *kInts; i++)
    LV_TRY(lv_check_int_range(kInts[i][0], lv_params_int(i ? dp : b, kInts[i][1]), INT32_MIN, INT32_MAX));
  bp->num_hyps_per_beam = (int)lv_params_int(b, "num_hyps_per_beam");
  bp->target_seq_length_ratio = (float)lv_params_float(b, "target_seq_length_ratio");
  bp->length_normalization = (float)lv_params_float(b, "length_normalization");
  bp->coverage_penalty = (float)lv_params_float(b, "coverage_penalty");
  bp->valid_eos_max_logit_delta = (float)lv_params_float(b, "valid_eos_max_logit_delta");
  bp->local_eos_threshold = (float)lv_params_float(b, "local_eos_threshold");
  bp->beam_size = (float)lv_params_float(b, "beam_size");
  bp->force_eos_in_last_step = lv_params_bool(b, "force_eos_in_last_step");
  bp->force_eos_in_top_k = lv_params_bool(b, "force_eos_in_top_k");
  bp->ensure_full_beam = lv_params_bool(b, "ensure_full_beam");
  bp->terminate_beams_independently = lv_params_bool(b, "terminate_beams_independently");
  bp->target_sos_id = (int)lv_params_int(dp, "target_sos_id");
  bp->target_eos_id = (int)lv_params_int(dp, "target_eos_id");
  bp->target_seq_len = (int)lv_params_int(dp, "target_seq_len");
  return NULL;
}

/* The tokenizer of input.tokenizer, required. */
static lv_status make_tokenizer(const lv_params *cfg, lv_tokenizer **tok) {
  const lv_params *ip = lv_params_sub(cfg, "input");
  if (!ip || !lv_params_has(ip, "tokenizer") || !lv_params_sub(ip, "tokenizer"))
    return lv_status_make(LV_ERR_INVALID, "input.tokenizer is None: the decoder needs the dataset's tokenizer to turn "
                          "ids into text (e.g. --model_params_override='input.tokenizer.cls: WpmTokenizer; "
                          "input.tokenizer.vocab_filepath: VOCAB; input.tokenizer.vocab_size: N')");
  lv_status s = lv_status_wrap(lv_tokenizer_create(lv_params_sub(ip, "tokenizer"), tok), "input.tokenizer");
  if (s && lv_status_code(s) == LV_ERR_NOT_FOUND) {
    /* A vocabulary that is not there yet: say where the recipe is, as lv_instance_create
     * does for the dataset's files ("model" is key@file). */
    const char *at = strchr(lv_params_str(cfg, "model"), '@');
    lv_status h = lv_status_make(LV_ERR_NOT_FOUND, "%s\n  The data is made as the comments at the top of %s say",
                                 lv_status_msg(s), at ? at + 1 : "the experiment file");
    lv_status_free(s);
    s = h;
  }
  return s;
}

static lv_status setup(lv_task *t, const lv_params *cfg, bool punct) {
  const lv_seq_decode_ops *ops = t->cls->seq_decode;
  LV_ASSERTF(ops, "%s has no seq_decode ops", t->cls->cls);
  lv_task_free_decode_state(t);
  seq_decoder *d = calloc(1, sizeof *d);
  LV_ASSERT(d);
  t->decode_state = d;
  t->decode_state_free = seq_decoder_free;
  d->punct = punct;
  LV_TRY(lv_seq_search_params(cfg, &d->bp));
  LV_TRY(make_tokenizer(cfg, &d->tok));
  if (d->bp.coverage_penalty > 0 && !ops->atten_probs)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.beam_search.coverage_penalty = %g: the coverage penalty needs "
                          "the decoder's attention probabilities, which lingvoc's %s decoder does not give; set it "
                          "to 0", d->bp.coverage_penalty, t->cls->cls);
  d->vocab = (int)ops->vocab_size(t);
  LV_TRY(lv_status_wrap(lv_beam_search_params_validate(&d->bp, d->vocab), "task.decoder.beam_search"));
  const lv_params *ip = lv_params_sub(cfg, "input");
  int64_t max_src = ip && lv_params_has(ip, "source_max_length") ? lv_params_int(ip, "source_max_length") : 300;
  if (max_src < 2 || max_src > INT32_MAX)
    return lv_status_make(LV_ERR_INVALID, "input.source_max_length = %lld: a source needs at least 2 positions (a "
                          "piece and </s>)", (long long)max_src);
  d->max_src = (int)max_src;
  /* The tokenizer's ids index the model's embeddings and softmax. */
  if (d->tok->num_ids > d->vocab)
    return lv_status_make(LV_ERR_INVALID, "input.tokenizer's vocabulary has %lld ids, more than the model's vocabulary "
                          "(%d, the decoder's softmax): ids beyond it would not decode; use the model's vocabulary",
                          (long long)d->tok->num_ids, d->vocab);
  if (d->tok->num_ids > 0 && d->tok->num_ids < d->vocab)
    lv_warn("input.tokenizer's vocabulary has %lld ids, fewer than the model's vocabulary (%d): the model's ids "
            "from %lld on decode to <unk>", (long long)d->tok->num_ids, d->vocab, (long long)d->tok->num_ids);
  const lv_params *tp = lv_params_sub(ip, "tokenizer");
  int64_t tv = tp && lv_params_has(tp, "vocab_size") ? lv_params_int(tp, "vocab_size") : 0;
  if (tv > d->vocab)
    return lv_status_make(LV_ERR_INVALID, "input.tokenizer.vocab_size = %lld is larger than the model's vocabulary "
                          "(%d, the decoder's softmax): ids beyond it would not decode; use the model's vocabulary",
                          (long long)tv, d->vocab);
  if (tv > 0 && tv < d->vocab)
    lv_warn("input.tokenizer.vocab_size = %lld is smaller than the model's vocabulary (%d): ids from %lld on decode "
            "to <unk>", (long long)tv, d->vocab, (long long)tv);
  return NULL;
}

lv_status lv_seq_decoder_setup(lv_task *t, const lv_params *cfg) {
  /* An MT task on PunctuatorInput's data is a punctuator too. */
  const lv_params *ip = lv_params_sub(cfg, "input");
  return setup(t, cfg, ip && !strcmp(lv_params_str(ip, "cls"), "PunctuatorInput"));
}

lv_status lv_seq_decoder_setup_punct(lv_task *t, const lv_params *cfg) { return setup(t, cfg, true); }

lv_status lv_seq_create_decoder_metrics(lv_task *t, lv_metric_set *metrics) {
  seq_decoder *d = decoder_of(t);
  LV_TRY(lv_metric_set_add(metrics, "corpus_bleu", lv_metric_corpus_bleu_new(LV_BLEU_SEP_NONE)));
  LV_TRY(lv_metric_set_add(metrics, "num_samples_in_batch", lv_metric_average_new()));
  LV_TRY(lv_metric_set_add(metrics, "sacrebleu", lv_sacrebleu_metric_new()));
  if (d->punct) LV_TRY(lv_metric_set_add(metrics, "punctuation", lv_punct_metric_new()));
  return NULL;
}

/* ---- decode ---- */

typedef struct step_ctx {
  const lv_seq_decode_ops *ops;
  void *st;
  int n; /* rows of every step: H * B */
} step_ctx;

static lv_status step_fn(void *ctx, int t, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                         float *atten_probs) {
  step_ctx *c = ctx;
  /* At t = 0 every row starts from the encoder state (parent[i] = i). */
  return c->ops->step(c->st, c->n, step_ids, t ? parent : NULL, log_probs, atten_probs);
}

/* The search's scorers: the task's decoder (sc), then the task's other scorers begun for
 * its rows (states in st[], NULL where not begun). */
static lv_status scorers_begin(lv_task *t, int vocab, step_ctx *sc, lv_search_scorer *out, void **st) {
  out[0] = (lv_search_scorer){.step = step_fn, .ctx = sc, .weight = 1.0f};
  for (int i = 0; i < t->n_scorers; i++) {
    const lv_scorer *x = t->scorers[i];
    LV_TRY(x->begin(x, vocab, sc->n, &st[i]));
    out[i + 1] = (lv_search_scorer){.step = x->step, .ctx = st[i], .weight = x->weight};
  }
  return NULL;
}

static void scorers_end(lv_task *t, void **st) {
  for (int i = 0; i < t->n_scorers; i++)
    if (st[i]) t->scorers[i]->end(st[i]);
}

/* Rows [r0, r0 + k) of every tensor of b whose first dimension is b's rows (views). */
static lv_status slice_rows(const lv_batch *b, int64_t rows, int64_t r0, int64_t k, lv_tensor *views, lv_batch *out) {
  lv_nmap_clear(&out->map);
  out->size = k;
  for (int i = 0; i < lv_nmap_count(&b->map); i++) {
    const lv_nmap_entry *e = lv_nmap_at(&b->map, i);
    const lv_tensor *x = e->t;
    if (x->shape.rank < 1 || x->shape.d[0] != rows) continue;
    lv_shape sh = x->shape;
    sh.d[0] = k;
    size_t row_bytes = lv_tensor_nbytes(x) / (size_t)rows;
    views[i] = lv_tensor_view(x->dtype, sh, (char *)x->data + (size_t)r0 * row_bytes);
    LV_TRY(lv_nmap_set(&out->map, e->key, &views[i]));
  }
  return NULL;
}

/* Sentences the memory budget allows in one search (at least 1). A search over n hyps
 * holds about n * row_bytes (the task's estimate); batches are searched in parts that stay
 * under LV_SEQ_SEARCH_BUDGET_BYTES. */
static int64_t chunk_rows(lv_task *t, const lv_beam_search_params *bp, const lv_batch *b) {
  int64_t per = t->cls->seq_decode->row_bytes(t, b, bp->target_seq_len) * bp->num_hyps_per_beam;
  int64_t k = per > 0 ? LV_SEQ_SEARCH_BUDGET_BYTES / per : 1;
  return k < 1 ? 1 : k;
}

/* Beam search over the k examples of batch c into rows [r0 * H, (r0 + k) * H) of ids
 * [., L], lens and scores. */
static lv_status search(lv_task *t, const lv_beam_search_params *bp, int vocab, lv_graph *g, const lv_batch *c,
                        int64_t k, int64_t r0, int32_t *ids, int32_t *lens, float *scores) {
  const lv_seq_decode_ops *ops = t->cls->seq_decode;
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  step_ctx sc = {.ops = ops, .n = (int)k * bp->num_hyps_per_beam};
  int32_t *atten_lens = calloc((size_t)k, sizeof *atten_lens);
  LV_ASSERT(atten_lens);
  int64_t atten_len = 0;
  lv_beam_search_result res = {0};
  lv_search_scorer *scorers = calloc((size_t)t->n_scorers + 1, sizeof *scorers);
  void **states = calloc((size_t)t->n_scorers + 1, sizeof *states);
  LV_ASSERT(scorers && states);
  lv_status s = ops->begin(t, g, c, &atten_len, atten_lens, &sc.st);
  if (!s) s = scorers_begin(t, vocab, &sc, scorers, states);
  /* The coverage penalty reads each example's attention over its own (unpadded) part. */
  int src_len = ops->atten_probs ? (int)atten_len : 0;
  if (!s)
    s = lv_beam_search_decode_scorers(bp, (int)k, vocab, src_len, src_len ? atten_lens : NULL, scorers,
                                      t->n_scorers + 1, &res);
  scorers_end(t, states);
  free(scorers);
  free(states);
  ops->end(sc.st);
  free(atten_lens);
  if (!s) {
    const int64_t L = bp->target_seq_len, n = k * bp->num_hyps_per_beam, o = r0 * bp->num_hyps_per_beam;
    LV_ASSERT(res.max_len == L);
    memcpy(ids + o * L, res.ids, sizeof *ids * (size_t)(n * L));
    memcpy(lens + o, res.lens, sizeof *lens * (size_t)n);
    memcpy(scores + o, res.scores, sizeof *scores * (size_t)n);
  }
  lv_beam_search_result_free(&res);
  return s;
}

lv_status lv_seq_beam_decode(lv_task *t, const lv_beam_search_params *bp, int vocab, lv_graph *g, const lv_batch *b,
                             int64_t rows, int64_t n, lv_decode_out *out) {
  const int64_t H = bp->num_hyps_per_beam, L = bp->target_seq_len;
  lv_tensor *ids = lv_tensor_new(LV_I32, lv_shape2(n * H, L)), *lens = lv_tensor_new(LV_I32, lv_shape1(n * H));
  lv_tensor *scores = lv_tensor_new(LV_F32, lv_shape1(n * H));
  LV_TRY(lv_decode_out_take(out, "topk_ids", ids));
  LV_TRY(lv_decode_out_take(out, "topk_lens", lens));
  LV_TRY(lv_decode_out_take(out, "topk_scores", scores));
  int nkeys = lv_nmap_count(&b->map);
  lv_tensor *views = calloc((size_t)(nkeys ? nkeys : 1), sizeof *views);
  LV_ASSERT(views);
  lv_batch c;
  lv_batch_init(&c);
  lv_status s = NULL;
  for (int64_t r0 = 0; !s && r0 < n;) {
    int64_t k = chunk_rows(t, bp, b);
    if (k > n - r0) k = n - r0;
    s = slice_rows(b, rows, r0, k, views, &c);
    if (!s) s = search(t, bp, vocab, g, &c, k, r0, lv_i32(ids), lv_i32(lens), lv_f32(scores));
    r0 += k;
  }
  lv_batch_free(&c);
  free(views);
  return s;
}

lv_status lv_seq_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out) {
  seq_decoder *d = decoder_of(t);
  lv_tensor *sids = lv_batch_get(b, "src.ids"), *spads = lv_batch_get(b, "src.paddings");
  if (!sids || !spads || sids->shape.rank != 2)
    return lv_status_make(LV_ERR_INVALID, "%s decodes batches with src.ids and src.paddings [batch, time] (an "
                          "NmtInput or PunctuatorInput dataset)", t->cls->cls);
  const int64_t B = sids->shape.d[0], n = b->size < B ? b->size : B;
  static const char *const kRefKeys[] = {"src.ids", "src.paddings", "tgt.labels", "tgt.paddings"};
  LV_TRY(lv_seq_keep_batch_keys(out, b, kRefKeys, LV_ARRAY_LEN(kRefKeys)));
  return lv_seq_beam_decode(t, &d->bp, d->vocab, g, b, B, n, out);
}

/* ---- post-processing ---- */

int lv_seq_row_len(const lv_tensor *pads, int64_t r) {
  int64_t w = pads->shape.d[1];
  const float *p = lv_f32(pads) + r * w;
  int n = 0;
  for (int64_t i = 0; i < w; i++) n += p[i] < 0.5f;
  return n;
}

lv_status lv_seq_row_text(const lv_tokenizer *tok, const int32_t *row, int width, int len, char **out) {
  int32_t l = len > 0 ? len - 1 : 0;
  if (l > width) l = width;
  return lv_tokenizer_ids_to_strings(tok, row, 1, width, &l, out);
}

lv_status lv_seq_keep_batch_keys(lv_decode_out *out, const lv_batch *b, const char *const *keys, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (lv_batch_get(b, keys[i])) LV_TRY(lv_decode_out_set(out, keys[i], lv_batch_get(b, keys[i])));
  return NULL;
}

static lv_status ids_text(const lv_tokenizer *tok, const lv_tensor *ids, const lv_tensor *pads, int64_t r, char **out) {
  return lv_seq_row_text(tok, lv_i32(ids) + r * ids->shape.d[1], (int)ids->shape.d[1], lv_seq_row_len(pads, r), out);
}

/* One example's entry: its src/ref/hyp lines as the value, its top hyp into metrics. */
static lv_status example_entry(seq_decoder *d, const lv_decode_out *o, int64_t i, lv_metric_set *ms, FILE *f,
                               char **src, char **ref, char **hyp0) {
  const lv_tensor *ids = lv_decode_out_get(o, "topk_ids"), *lens = lv_decode_out_get(o, "topk_lens");
  const lv_tensor *scores = lv_decode_out_get(o, "topk_scores");
  const int H = d->bp.num_hyps_per_beam, L = (int)ids->shape.d[1];
  LV_TRY(ids_text(d->tok, lv_decode_out_get(o, "src.ids"), lv_decode_out_get(o, "src.paddings"), i, src));
  LV_TRY(ids_text(d->tok, lv_decode_out_get(o, "tgt.labels"), lv_decode_out_get(o, "tgt.paddings"), i, ref));
  fprintf(f, "src: %s\nref: %s", *src, *ref);
  for (int h = 0; h < H; h++) {
    int64_t r = i * H + h;
    int len = lv_i32(lens)[r];
    if (len == 0) continue;
    char *hyp = NULL;
    LV_TRY(lv_seq_row_text(d->tok, lv_i32(ids) + r * L, L, len, &hyp));
    fprintf(f, "\nhyp %d: score %.6f: %s", h, lv_f32(scores)[r], hyp);
    if (h == 0) *hyp0 = hyp;
    else free(hyp);
  }
  const char *top = *hyp0 ? *hyp0 : "";
  LV_TRY(lv_metric_bleu_update(lv_metric_set_get(ms, "corpus_bleu"), *ref, top));
  LV_TRY(lv_sacrebleu_metric_add(lv_metric_set_get(ms, "sacrebleu"), *ref, top));
  if (d->punct) LV_TRY(lv_punct_metric_add(lv_metric_set_get(ms, "punctuation"), top, *ref));
  return NULL;
}

lv_status lv_seq_post_process_decode_out(lv_task *t, const lv_decode_out *dec_out, lv_metric_set *metrics,
                                         lv_kv_list *out) {
  seq_decoder *d = decoder_of(t);
  if (!lv_decode_out_get(dec_out, "tgt.labels") || !lv_decode_out_get(dec_out, "tgt.paddings"))
    return lv_status_make(LV_ERR_INVALID, "%s: the batch gives no tgt.labels / tgt.paddings to score against (an "
                          "NmtInput or PunctuatorInput dataset is needed)", t->cls->cls);
  lv_metric *nsb = lv_metric_set_get(metrics, "num_samples_in_batch");
  const int64_t n = lv_tensor_numel(lv_decode_out_get(dec_out, "topk_lens")) / d->bp.num_hyps_per_beam;
  /* Examples are numbered over the checkpoint's whole pass. */
  const int64_t first = (int64_t)lv_metric_total_value(nsb);
  lv_status s = NULL;
  for (int64_t i = 0; !s && i < n; i++) {
    char *text = NULL, *src = NULL, *ref = NULL, *hyp0 = NULL, key[48];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    LV_ASSERT(f);
    s = example_entry(d, dec_out, i, metrics, f, &src, &ref, &hyp0);
    fclose(f);
    snprintf(key, sizeof key, "example %lld", (long long)(first + i));
    if (!s) s = lv_kv_list_add(out, key, text);
    free(text);
    free(src);
    free(ref);
    free(hyp0);
  }
  if (!s) s = lv_metric_average_update(nsb, (double)n, 1.0);
  return s;
}

lv_status lv_seq_decoder_report(lv_task *t, const lv_metric_set *metrics, char **headline, char **detail) {
  seq_decoder *d = decoder_of(t);
  double bleu = 0, sb = 0;
  LV_TRY(lv_metric_value(lv_metric_set_get(metrics, "corpus_bleu"), &bleu));
  LV_TRY(lv_metric_value(lv_metric_set_get(metrics, "sacrebleu"), &sb));
  LV_ASSERT(asprintf(headline, "corpus_bleu: %.6f, sacrebleu: %.2f", bleu, sb) >= 0);
  *detail = NULL;
  if (d->punct) {
    char rep[4096];
    lv_punct_metric_format(lv_metric_set_get(metrics, "punctuation"), rep, sizeof rep);
    LV_ASSERT(asprintf(detail, "punctuation and capitals restored:\n%s", rep) >= 0);
  }
  return NULL;
}

/* ---- interactive decoding ---- */

lv_status lv_seq_line_describe(lv_task *t, const char *kind, const char **verb, const char **note) {
  seq_decoder *d = decoder_of(t);
  if (strcmp(kind, "decode_text"))
    return lv_status_make(LV_ERR_INVALID, "--%s: %s decodes text (--decode_text)", kind, t->cls->cls);
  *verb = d->punct ? "punctuating" : "translating";
  *note = d->punct ? "; each line is first lower-cased and stripped of punctuation, as PunctuatorInput's sources are"
                   : "";
  return NULL;
}


lv_status lv_seq_line_to_batch(lv_task *t, const char *kind, const char *line, size_t len, int64_t lineno,
                               lv_batch *b, bool *empty) {
  seq_decoder *d = decoder_of(t);
  const char *verb, *note;
  LV_TRY(lv_seq_line_describe(t, kind, &verb, &note));
  *empty = true;
  lv_nmap_clear(&b->map);
  b->size = 0;
  size_t bad = 0;
  if (!lv_utf8_valid(line, len, &bad)) {
    lv_warn("decode_%s: line %lld: invalid UTF-8 at byte %zu: not translated (empty output line)", kind,
            (long long)lineno, bad);
    return NULL;
  }
  /* The punctuator reads its source as PunctuatorInput makes it from a line: typed text
   * with capitals and marks gets them removed first, as the training sources had. */
  lv_tok_str norm = {0};
  if (d->punct) {
    lv_status ns = lv_punctuator_normalize(line, len, &norm);
    if (ns) {
      free(norm.s);
      return ns;
    }
    line = norm.s ? norm.s : "";
    len = norm.n;
  }
  lv_tok_ids ids = {0};
  lv_status es = lv_tokenizer_encode(d->tok, line, len, &ids);
  free(norm.s);
  LV_TRY(es);
  int n = ids.n;
  if (n == 0) {
    lv_tok_ids_free(&ids);
    return NULL;
  }
  if (n + 1 > d->max_src) {
    lv_warn("decode_%s: line %lld: %d pieces is more than input.source_max_length %d: truncated to the first %d", kind,
            (long long)lineno, n + 1, d->max_src, d->max_src - 1);
    n = d->max_src - 1;
  }
  if (d->line_cap < (size_t)n + 1) {
    free(d->line_ids);
    free(d->line_pads);
    d->line_cap = (size_t)n + 1;
    d->line_ids = malloc(sizeof *d->line_ids * d->line_cap);
    d->line_pads = malloc(sizeof *d->line_pads * d->line_cap);
    LV_ASSERT(d->line_ids && d->line_pads);
  }
  for (int i = 0; i < n; i++)
    if (ids.v[i] < 0 || ids.v[i] >= d->vocab) {
      int32_t bad_id = ids.v[i];
      lv_tok_ids_free(&ids);
      return lv_status_make(LV_ERR_INVALID, "input.tokenizer gives id %d, outside the model's vocabulary [0, %d): "
                            "its vocabulary (input.tokenizer.vocab_filepath) is not the model's", bad_id, d->vocab);
    }
  memcpy(d->line_ids, ids.v, sizeof *d->line_ids * (size_t)n);
  d->line_ids[n] = d->tok->eos_id;
  memset(d->line_pads, 0, sizeof *d->line_pads * (size_t)(n + 1));
  lv_tok_ids_free(&ids);
  d->ids_view = lv_tensor_view(LV_I32, lv_shape2(1, n + 1), d->line_ids);
  d->pads_view = lv_tensor_view(LV_F32, lv_shape2(1, n + 1), d->line_pads);
  LV_TRY(lv_nmap_set(&b->map, "src.ids", &d->ids_view));
  LV_TRY(lv_nmap_set(&b->map, "src.paddings", &d->pads_view));
  b->size = 1;
  *empty = false;
  return NULL;
}

lv_status lv_seq_decode_out_to_line(lv_task *t, const lv_decode_out *dec_out, char **line) {
  seq_decoder *d = decoder_of(t);
  const lv_tensor *ids = lv_decode_out_get(dec_out, "topk_ids"), *lens = lv_decode_out_get(dec_out, "topk_lens");
  if (lv_i32(lens)[0] > 0) return lv_seq_row_text(d->tok, lv_i32(ids), (int)ids->shape.d[1], lv_i32(lens)[0], line);
  *line = strdup("");
  LV_ASSERT(*line);
  return NULL;
}

lv_status lv_seq_nbest(const lv_tokenizer *tok, int H, const lv_decode_out *dec_out, int64_t row, int k, char **texts,
                       float *scores, int *n) {
  *n = 0;
  if (row < 0 || !dec_out) return NULL;
  const lv_tensor *ids = lv_decode_out_get(dec_out, "topk_ids"), *lens = lv_decode_out_get(dec_out, "topk_lens");
  const lv_tensor *sc = lv_decode_out_get(dec_out, "topk_scores");
  if (!ids || !lens || !sc) return lv_status_make(LV_ERR_INTERNAL, "the decode gave no topk_ids / topk_lens / topk_scores");
  const int L = (int)ids->shape.d[1];
  for (int h = 0; h < H && *n < k; h++) {
    const int64_t r = row * H + h;
    if (lv_i32(lens)[r] == 0) continue;
    LV_TRY(lv_seq_row_text(tok, lv_i32(ids) + r * L, L, lv_i32(lens)[r], &texts[*n]));
    scores[(*n)++] = lv_f32(sc)[r];
  }
  return NULL;
}

lv_status lv_seq_decode_out_nbest(lv_task *t, const lv_decode_out *dec_out, int i, int k, char **texts, float *scores,
                                  int *n) {
  seq_decoder *d = decoder_of(t);
  return lv_seq_nbest(d->tok, d->bp.num_hyps_per_beam, dec_out, i, k, texts, scores, n);
}
