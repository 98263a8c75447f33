#include "runners/decoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/log.h"
#include "base/names.h"
#include "input/punctuator_input.h"
#include "input/tokenizer.h"
#include "io/events.h"
#include "models/beam_search.h"
#include "models/bleu.h"
#include "models/metrics.h"
#include "models/mt.h"
#include "models/punct_metrics.h"
#include "models/sacrebleu.h"
#include "runners/follower.h"
#include "runners/instance.h"

typedef struct dec_state {
  lv_instance *m;
  lv_tokenizer *tok;
  lv_beam_search_params bp;
  const lv_mt_decode_ops *ops; /* the task's incremental decoder */
  int vocab;
  bool punct; /* a punctuator task: also its metrics (models/punct_metrics.h) */
  lv_events_writer *ev;
  char dir[4400], job[64];
  lv_saveable *items;
  int nitems;
} dec_state;

/* The task's beam search params (task.decoder.beam_search and target_*). */
static lv_status search_params(const lv_params *cfg, lv_beam_search_params *bp) {
  const lv_params *dp = lv_params_sub(cfg, "task.decoder");
  if (!dp || !lv_params_has(dp, "beam_search"))
    return lv_status_make(LV_ERR_INVALID, "task.decoder.beam_search is missing: bin/decoder decodes MT tasks "
                          "(mt.model.TransformerModel, mt.model.RNMTModel; task.cls is %s)",
                          lv_params_str(cfg, "task.cls"));
  const lv_params *b = lv_params_sub(dp, "beam_search");
  *bp = lv_beam_search_params_default();
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

typedef struct step_ctx {
  const lv_mt_decode_ops *ops;
  void *st;
  int n; /* rows of every step: H * B */
} step_ctx;

static lv_status step_fn(void *ctx, int t, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                         float *atten_probs) {
  step_ctx *c = ctx;
  /* At t = 0 every row starts from the encoder state (parent[i] = i). */
  return c->ops->step(c->st, c->n, step_ids, t ? parent : NULL, log_probs, atten_probs);
}

/* Tokens in row r of paddings [rows, width] (1 - padding summed). */
static int row_len(const lv_tensor *pads, int r) {
  int64_t w = pads->shape.d[1];
  const float *p = lv_f32(pads) + r * w;
  int n = 0;
  for (int64_t i = 0; i < w; i++) n += p[i] < 0.5f;
  return n;
}

/* Beam search over host src ids [B, S] and paddings [B, S] (1 = padded). */
static lv_status decode_ids(dec_state *d, const lv_tensor *src_ids, const lv_tensor *src_pads,
                            lv_beam_search_result *res) {
  lv_graph *g = d->m->graph;
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_tensor *sids = lv_graph_from_host(g, src_ids), *spads = lv_graph_from_host(g, src_pads);
  if (!sids || !spads) {
    lv_status s = lv_graph_status(g);
    return s ? lv_status_wrap(s, "decoder: the source batch")
             : lv_status_make(LV_ERR_INTERNAL, "decoder: copying the source batch failed");
  }
  step_ctx c = {.ops = d->ops};
  int B = (int)src_ids->shape.d[0], S = (int)src_ids->shape.d[1];
  c.n = B * d->bp.num_hyps_per_beam;
  /* The coverage penalty reads each sentence's attention over its own (unpadded) tokens. */
  int src_len = d->ops->atten_probs ? S : 0;
  int32_t *src_lens = src_len ? malloc(sizeof *src_lens * (size_t)B) : NULL;
  for (int b = 0; src_lens && b < B; b++) src_lens[b] = row_len(src_pads, b);
  lv_status s = d->ops->begin(d->m->task, g, sids, spads, &c.st);
  if (!s) s = lv_beam_search_decode(&d->bp, B, d->vocab, src_len, src_lens, step_fn, &c, res);
  d->ops->end(c.st);
  free(src_lens);
  return s;
}

/* Row r of ids [rows, width] up to len - 1 (dropping the final </s>) as text. */
static lv_status row_text(const lv_tokenizer *tok, const int32_t *row, int width, int len, char **out) {
  int32_t l = len > 0 ? len - 1 : 0;
  if (l > width) l = width;
  return lv_tokenizer_ids_to_strings(tok, row, 1, width, &l, out);
}

/* Sentences the memory budget allows in one search (at least 1). A search over n hyps
 * holds about n * row_bytes (the task's estimate: the Transformer's key/value caches
 * outside the graph plus one step's graph memory, linear in target_seq_len; RNMT's
 * per-step states and attention, linear in target_seq_len and the source length);
 * batches are decoded in chunks that stay under kSearchBudgetBytes. */
static const int64_t kSearchBudgetBytes = (int64_t)2 << 30;

static int64_t chunk_sentences(const dec_state *d, int64_t src_len) {
  int64_t per = d->ops->row_bytes(d->m->task, d->bp.target_seq_len, src_len) * d->bp.num_hyps_per_beam;
  int64_t k = per > 0 ? kSearchBudgetBytes / per : 1;
  return k < 1 ? 1 : k;
}

/* Decodes sentences [c0, c0 + k) of a batch; writes their blocks (numbered from seen + i)
 * and scores their top hyps. */
static lv_status decode_rows(dec_state *d, const lv_tensor *sids, const lv_tensor *spads,
                             const lv_tensor *tlab, const lv_tensor *tpads, int64_t c0, int64_t k, int64_t seen,
                             FILE *of, lv_bleu_scorer *bleu, lv_sacrebleu *sb, lv_punct_metrics *pm) {
  const int H = d->bp.num_hyps_per_beam;
  int64_t S = sids->shape.d[1];
  lv_tensor ci = lv_tensor_view(LV_I32, lv_shape2(k, S), lv_i32(sids) + c0 * S);
  lv_tensor cp = lv_tensor_view(LV_F32, lv_shape2(k, S), lv_f32(spads) + c0 * S);
  lv_beam_search_result res = {0};
  lv_status s = decode_ids(d, &ci, &cp, &res);
  for (int j = 0; !s && j < k; j++) {
    int i = (int)(c0 + j);
    char *src = NULL, *ref = NULL;
    s = row_text(d->tok, lv_i32(sids) + i * sids->shape.d[1], (int)sids->shape.d[1], row_len(spads, i), &src);
    if (!s) s = row_text(d->tok, lv_i32(tlab) + i * tlab->shape.d[1], (int)tlab->shape.d[1], row_len(tpads, i), &ref);
    if (!s) fprintf(of, "example %lld\nsrc: %s\nref: %s\n", (long long)(seen + i), src, ref);
    for (int h = 0; !s && h < H; h++) {
      int r = j * H + h;
      if (res.lens[r] == 0) continue;
      char *hyp = NULL;
      s = row_text(d->tok, res.ids + (int64_t)r * res.max_len, res.max_len, res.lens[r], &hyp);
      if (s) break;
      fprintf(of, "hyp %d: score %.6f: %s\n", h, res.scores[r], hyp);
      if (h == 0) {
        s = lv_bleu_add_sentence(bleu, ref, hyp);
        if (!s) s = lv_sacrebleu_add_sentence(sb, ref, hyp);
        if (!s && pm) s = lv_punct_metrics_add(pm, hyp, ref);
      }
      free(hyp);
    }
    if (!s && res.lens[j * H] == 0) {
      s = lv_bleu_add_sentence(bleu, ref, "");
      if (!s) s = lv_sacrebleu_add_sentence(sb, ref, "");
      if (!s && pm) s = lv_punct_metrics_add(pm, "", ref);
    }
    fputc('\n', of);
    free(src);
    free(ref);
  }
  lv_beam_search_result_free(&res);
  return s;
}

static int cmp_tag(const void *a, const void *b) {
  return strcmp(((const lv_summary_value *)a)->tag, ((const lv_summary_value *)b)->tag);
}

/* The punctuator's decoder metrics as summary values: exact_match and per class
 * (comma, period, question, exclamation, semicolon, colon, quote, marks, capital)
 * precision_X, recall_X, f1_X. Returns how many were written. */
static int punct_summaries(const lv_punct_metrics *pm, lv_summary_value *sv) {
  static const char *const names[LV_PUNCT_CLASS_COUNT] = {"comma", "period", "question", "exclamation",
                                                          "semicolon", "colon", "quote", "marks", "capital"};
  int n = 0;
  snprintf(sv[n].tag, sizeof sv[n].tag, "exact_match");
  sv[n++].value = lv_punct_exact_rate(pm);
  for (int c = 0; c < LV_PUNCT_CLASS_COUNT; c++) {
    double p, r, f;
    lv_punct_prf(&pm->counts[c], &p, &r, &f);
    snprintf(sv[n].tag, sizeof sv[n].tag, "precision_%s", names[c]);
    sv[n++].value = p;
    snprintf(sv[n].tag, sizeof sv[n].tag, "recall_%s", names[c]);
    sv[n++].value = r;
    snprintf(sv[n].tag, sizeof sv[n].tag, "f1_%s", names[c]);
    sv[n++].value = f;
  }
  return n;
}

static lv_status decode_checkpoint(dec_state *d, const char *prefix) {
  lv_instance *m = d->m;
  double t0 = lv_now_monotonic();
  LV_TRY(lv_checkpoint_restore(prefix, d->items, d->nitems));
  int64_t step = lv_instance_step(m);
  lv_bleu_scorer bleu;
  lv_sacrebleu sb;
  LV_TRY(lv_bleu_init(&bleu, 4, LV_BLEU_SEP_NONE));
  LV_TRY(lv_sacrebleu_init(&sb, NULL));
  lv_punct_metrics pm;
  if (d->punct) LV_TRY(lv_punct_metrics_init(&pm));
  LV_TRY(lv_input_reset(m->input));
  char *out = NULL;
  size_t outlen = 0;
  FILE *of = open_memstream(&out, &outlen);
  LV_ASSERT(of);
  lv_batch b;
  lv_batch_init(&b);
  lv_status s = NULL;
  int64_t seen = 0, nbatches = 0;
  double last_log = t0;
  for (bool done = false; !s;) {
    s = lv_input_next_eval(m->input, &b, &done);
    if (s || done) break;
    lv_tensor *sids = lv_batch_get(&b, "src.ids"), *spads = lv_batch_get(&b, "src.paddings");
    lv_tensor *tlab = lv_batch_get(&b, "tgt.labels"), *tpads = lv_batch_get(&b, "tgt.paddings");
    if (!sids || !spads || !tlab || !tpads) {
      s = lv_status_make(LV_ERR_INVALID, "decoder: the %s input gives no src.ids/src.paddings/tgt.labels/"
                         "tgt.paddings (an NmtInput dataset is needed)", d->job);
      break;
    }
    int B = (int)sids->shape.d[0];
    int64_t n = b.size < B ? b.size : B;
    for (int64_t c0 = 0; !s && c0 < n;) {
      int64_t k = chunk_sentences(d, sids->shape.d[1]);
      if (k > n - c0) k = n - c0;
      s = decode_rows(d, sids, spads, tlab, tpads, c0, k, seen, of, &bleu, &sb, d->punct ? &pm : NULL);
      c0 += k;
    }
    seen += n;
    nbatches++;
    double now = lv_now_monotonic();
    if (!s && now - last_log > 10) {
      lv_info("%s: step %lld: decoded %lld examples, %.2f examples/sec", d->job, (long long)step, (long long)seen,
              seen / (now - t0));
      last_log = now;
    }
  }
  lv_batch_free(&b);
  fclose(of);
  double secs = lv_now_monotonic() - t0;
  char path[8192];
  if (!s) {
    snprintf(path, sizeof path, "%s/decoder_out_%09lld", d->dir, (long long)step);
    s = lv_file_write_atomic(path, out, outlen);
  }
  free(out);
  if (s) return s;
  lv_summary_value sv[4 + 1 + 3 * LV_PUNCT_CLASS_COUNT] = {
      {"corpus_bleu", lv_bleu_score(&bleu)},
      {"examples/sec", secs > 0 ? seen / secs : 0},
      {"num_samples_in_batch", nbatches ? (double)seen / nbatches : 0},
      {"sacrebleu", lv_sacrebleu_value(&sb)}};
  int nsv = 4;
  if (d->punct) nsv += punct_summaries(&pm, sv + nsv);
  /* Sorted by tag, as Lingvo's score files are. */
  qsort(sv, (size_t)nsv, sizeof *sv, cmp_tag);
  char *score = lv_summary_score_text(sv, nsv);
  LV_ASSERT(score);
  snprintf(path, sizeof path, "%s/score-%08lld.txt", d->dir, (long long)lv_checkpoint_step(prefix));
  s = lv_file_write_atomic(path, score, strlen(score));
  free(score);
  for (int i = 0; i < nsv; i++) lv_events_scalar(d->ev, sv[i].tag, step, sv[i].value);
  lv_info("%s: step:%6lld, corpus_bleu: %.6f, sacrebleu: %.2f (%lld examples, %.3f s, %.2f examples/sec)", d->job,
          (long long)step, lv_bleu_score(&bleu), lv_sacrebleu_value(&sb), (long long)seen, secs,
          secs > 0 ? seen / secs : 0);
  if (d->punct) {
    char rep[4096];
    lv_punct_metrics_format(&pm, rep, sizeof rep);
    lv_info("%s: step %lld: punctuation and capitals restored:\n%s", d->job, (long long)step, rep);
  }
  if (!s) s = lv_events_flush(d->ev);
  return s;
}

/* The tokenizer of the input params ip (input.tokenizer), required. */
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

static lv_status setup(const lv_params *cfg, bool with_input, dec_state *d) {
  LV_TRY(search_params(cfg, &d->bp));
  LV_TRY(make_tokenizer(cfg, &d->tok));
  LV_TRY(lv_instance_create(cfg, with_input, lv_input_no_shard(), &d->m));
  d->ops = d->m->task->cls->mt_decode;
  if (!d->ops)
    return lv_status_make(LV_ERR_INVALID, "bin/decoder decodes MT tasks (mt.model.TransformerModel, "
                          "mt.model.RNMTModel), not %s", d->m->task->cls->cls);
  if (d->bp.coverage_penalty > 0 && !d->ops->atten_probs)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.beam_search.coverage_penalty = %g: the coverage penalty needs "
                          "the decoder's attention probabilities, which lingvoc's %s decoder does not give; set it "
                          "to 0", d->bp.coverage_penalty, d->m->task->cls->cls);
  d->vocab = (int)d->ops->vocab_size(d->m->task);
  /* The punctuator codelab's task, or any MT task on PunctuatorInput's data. */
  d->punct = !strcmp(d->m->task->cls->cls, "punctuator.model.RNMTModel") ||
             !strcmp(lv_params_str(cfg, "input.cls"), "PunctuatorInput");
  LV_TRY(lv_status_wrap(lv_beam_search_params_validate(&d->bp, d->vocab), "task.decoder.beam_search"));
  d->items = lv_instance_saveables(d->m, &d->nitems);
  return NULL;
}

static void teardown(dec_state *d) {
  free(d->items);
  lv_instance_destroy(d->m);
  lv_tokenizer_destroy(d->tok);
}

/* Whether s[0..n) is valid UTF-8; *bad = the offset of the first bad byte. */
static bool valid_utf8(const char *s, size_t n, size_t *bad) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    int k;
    uint32_t cp, min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xe0) == 0xc0) k = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) k = 2, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) k = 3, cp = c & 0x07, min = 0x10000;
    else { *bad = i; return false; }
    for (int j = 1; j <= k; j++) {
      if (i + j >= n || (u[i + j] & 0xc0) != 0x80) { *bad = i; return false; }
      cp = cp << 6 | (u[i + j] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) { *bad = i; return false; }
    i += k + 1;
  }
  return true;
}

/* One line -> its translation (malloc'd, "" when there is nothing to translate). */
static lv_status translate_line(dec_state *d, const char *line, size_t len, int64_t lineno, int max_src,
                                char **out) {
  *out = NULL;
  size_t bad = 0;
  if (!valid_utf8(line, len, &bad)) {
    lv_warn("decode_text: line %lld: invalid UTF-8 at byte %zu: not translated (empty output line)",
            (long long)lineno, bad);
    *out = strdup("");
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
  if (ids.n == 0) {
    lv_tok_ids_free(&ids);
    *out = strdup("");
    return NULL;
  }
  int n = ids.n;
  if (n + 1 > max_src) {
    lv_warn("decode_text: line %lld: %d pieces is more than input.source_max_length %d: truncated to the first %d",
            (long long)lineno, n + 1, max_src, max_src - 1);
    n = max_src - 1;
  }
  int32_t *sid = malloc(sizeof *sid * (n + 1));
  float *spad = calloc(n + 1, sizeof *spad);
  LV_ASSERT(sid && spad);
  memcpy(sid, ids.v, sizeof *sid * n);
  sid[n] = d->tok->eos_id;
  lv_tok_ids_free(&ids);
  lv_tensor ti = lv_tensor_view(LV_I32, lv_shape2(1, n + 1), sid), tp = lv_tensor_view(LV_F32, lv_shape2(1, n + 1), spad);
  lv_beam_search_result res = {0};
  lv_status s = decode_ids(d, &ti, &tp, &res);
  if (!s && res.lens[0] > 0) s = row_text(d->tok, res.ids, res.max_len, res.lens[0], out);
  else if (!s) *out = strdup("");
  lv_beam_search_result_free(&res);
  free(sid);
  free(spad);
  return s;
}

static lv_status decode_text(const lv_params *cfg, const lv_decoder_options *opt) {
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  char train_dir[4200], prefix[8192];
  snprintf(train_dir, sizeof train_dir, "%s/train", logdir);
  const char *ck = opt->checkpoint && *opt->checkpoint ? opt->checkpoint : train_dir;
  struct stat st;
  if (!stat(ck, &st) && S_ISDIR(st.st_mode)) {
    int64_t step;
    bool found = false;
    LV_TRY(lv_checkpoint_latest(ck, prefix, sizeof prefix, &step, &found));
    if (!found) return lv_status_make(LV_ERR_NOT_FOUND, "--decode_text: no checkpoint in %s", ck);
  } else {
    snprintf(prefix, sizeof prefix, "%s", ck);
  }
  FILE *in = strcmp(opt->decode_text, "-") ? fopen(opt->decode_text, "rb") : stdin;
  if (!in) return lv_status_make(LV_ERR_NOT_FOUND, "--decode_text=%s: cannot open it", opt->decode_text);
  dec_state d = {0};
  lv_status s = setup(cfg, false, &d);
  if (!s) s = lv_status_wrap(lv_checkpoint_restore(prefix, d.items, d.nitems), "--decode_text");
  if (!s) lv_warn_model_params_drift(prefix, cfg);
  const lv_params *ip = lv_params_sub(cfg, "input");
  int max_src = ip && lv_params_has(ip, "source_max_length") ? (int)lv_params_int(ip, "source_max_length") : 300;
  if (max_src < 2) max_src = 2;
  if (!s) lv_info("decode_text: %s with %s (step %lld)%s", d.punct ? "punctuating" : "translating", prefix,
                  (long long)lv_instance_step(d.m),
                  d.punct ? "; each line is first lower-cased and stripped of punctuation, as PunctuatorInput's sources are" : "");
  FILE *out = opt->out ? opt->out : stdout;
  char *line = NULL;
  size_t cap = 0;
  int64_t lineno = 0;
  for (ssize_t len; !s && (len = getline(&line, &cap, in)) >= 0;) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    char *tr = NULL;
    s = translate_line(&d, line, (size_t)len, lineno, max_src, &tr);
    if (s) {
      s = lv_status_wrap(s, "--decode_text=%s line %lld", opt->decode_text, (long long)lineno);
      break;
    }
    fprintf(out, "%s\n", tr);
    fflush(out);
    free(tr);
  }
  free(line);
  if (in != stdin) fclose(in);
  teardown(&d);
  return s;
}

lv_status lv_decoder_run(const lv_params *cfg, const lv_decoder_options *opt) {
  if (opt->decode_text) return decode_text(cfg, opt);
  dec_state d = {0};
  const char *logdir = lv_params_str(cfg, "cluster.logdir");
  LV_TRY(lv_job_dir_prepare(cfg, "decoder", opt->dataset, d.dir, sizeof d.dir, d.job, sizeof d.job));
  lv_status s = NULL;
  char train_dir[4200];
  snprintf(train_dir, sizeof train_dir, "%s/train", logdir);
  const lv_params *ep = lv_params_sub(cfg, "task.eval");
  const int64_t own_max_steps = lv_params_int(cfg, "train.max_steps");
  int64_t max_steps;
  LV_TRY(lv_trainer_max_steps_latest(train_dir, own_max_steps, &max_steps));
  lv_follower_options fo = {.train_dir = train_dir,
                            .job_dir = d.dir,
                            .job = d.job,
                            .max_steps = max_steps,
                            .all_checkpoints = lv_params_has(ep, "decode_all_checkpoints") &&
                                               lv_params_bool(ep, "decode_all_checkpoints"),
                            .once = opt->once,
                            .checkpoint = opt->checkpoint,
                            .start_after = lv_params_has(ep, "start_decoder_after")
                                               ? lv_params_int(ep, "start_decoder_after") : 0,
                            .start_after_name = "eval.start_decoder_after",
                            .verb = "decoded",
                            .max_poll_secs = opt->max_poll_secs,
                            .timeout_secs = opt->timeout_secs};
  lv_follower *f = NULL;
  LV_TRY(lv_follower_create(&fo, &f));
  s = setup(cfg, true, &d);
  char prefix[8192];
  int64_t step;
  bool done = false;
  while (!s) {
    s = lv_follower_next(f, prefix, sizeof prefix, &step, &done);
    if (s || done) break;
    if (!d.ev && (s = lv_events_writer_open(d.dir, 5.0, &d.ev))) break;
    lv_warn_model_params_drift(prefix, cfg);
    s = decode_checkpoint(&d, prefix);
    if (!s && !fo.once) lv_follower_set_max_steps(f, max_steps = lv_trainer_max_steps(prefix, max_steps, own_max_steps));
    s = s ? lv_follower_failed(f, s) : lv_follower_mark_processed(f);
  }
  if (d.ev) {
    lv_status s2 = lv_events_writer_close(d.ev);
    if (!s) s = s2;
    else lv_status_free(s2);
  }
  teardown(&d);
  lv_follower_destroy(f);
  return s;
}
