/* The library API (include/lingvoc.h) over the decoder's pieces: a model is the
 * experiment's options and its checkpoint; a session is an lv_line_decoder (instance,
 * the task's decoder_setup, the params' scorers, restored weights) built from them with
 * the session's decode options as params overrides, as bin/decoder's flags become
 * overrides, plus the options' LM scorers (a session of each LM model). Each call
 * picks the task's hooks for its kind of work (models/task.h) and reads the decode
 * outputs into typed results. Every entry point routes what the library logs to the
 * model's callback (or nowhere) for the calling thread only. */
#include "lingvoc.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "input/batch.h"
#include "io/png_decode.h"
#include "kernels/kernels.h"
#include "models/model.h"
#include "models/task.h"
#include "runners/cli.h"
#include "runners/decoder.h"
#include "runners/instance.h"
#include "runners/model_export.h"
#include "runners/scorers.h"
#include "search/lm_fusion.h"

_Static_assert(LV_STATUS_INVALID == LV_ERR_INVALID && LV_STATUS_NOT_FOUND == LV_ERR_NOT_FOUND &&
                   LV_STATUS_CORRUPT == LV_ERR_CORRUPT && LV_STATUS_IO == LV_ERR_IO &&
                   LV_STATUS_RESOURCE == LV_ERR_RESOURCE && LV_STATUS_INTERNAL == LV_ERR_INTERNAL &&
                   LV_STATUS_CANCELLED == LV_ERR_CANCELLED && LV_ERR_COUNT == 8,
               "lingvoc.h's LV_STATUS_* are base/status.h's lv_code");

#define API_DEFAULT_BATCH 8
#define API_MAX_ITEMS 1000000

struct lv_model {
  char *model, *logdir, *experiments_dir, *dataset, *params_override, *params_file_override;
  char *checkpoint; /* the resolved prefix every session restores (a model file: its path) */
  lv_model_file *file; /* lv_model_load_file's, else NULL */
  char assets_dir[LV_PATH_MAX]; /* the file's assets, removed with the model */
  int num_threads;
  bool gpu;                 /* lv_load_options.gpu: cluster.worker.gpus_per_replica 1 */
  lv_decode_options decode; /* the load options' (lv_session_new's NULL); scorers: a copy */
  lv_log_sink sink;
  char task_cls[128];
  lv_session *own; /* the NULL session's, used under mu */
  pthread_mutex_t mu;
};

struct lv_session {
  lv_model *m;
  lv_params *cfg;
  lv_line_decoder *ld;
  /* The options' scorers: each LM model's own session (its weights) and its scorer, which
   * the task's searches add after the params' (runners/scorers.h). */
  lv_session **lm;
  lv_lm_fusion *fusion;
  int n_lm;
  int batch_size;
  bool keep_going;
  int64_t lines_seen; /* sources lv_translate and lv_score_text took: messages number lines from here */
  unsigned described; /* the kinds (bits of kKinds) whose first call logged what the session does */
};

const char *lv_version(void) { return LINGVOC_VERSION; }

int lv_status_error(lv_status s) { return s ? (int)lv_status_code(s) : LV_STATUS_OK; }

void lv_decode_options_init(lv_decode_options *o) {
  *o = (lv_decode_options){.num_hyps = 0, .beam_size = -1, .length_normalization = -1, .coverage_penalty = -1,
                           .target_seq_len = 0, .fusion_lm_weight = -1, .temperature = 0, .top_k = -1, .seed = -1,
                           .batch_size = 0, .keep_going = 0, .scorers = NULL, .n_scorers = 0};
}

void lv_load_options_init(lv_load_options *o) {
  memset(o, 0, sizeof *o);
  lv_decode_options_init(&o->decode);
  o->log_level = LV_LOG_WARN;
}

/* ---- logging: the model's sink on this thread for the length of a call ---- */

typedef struct api_log_user {
  lv_log_callback fn;
  void *user;
} api_log_user;

static void api_log_forward(void *user, lv_log_level level, const char *message) {
  const api_log_user *u = user;
  u->fn(u->user, (int)level, message);
}

/* ---- options -> params overrides ---- */

/* The decode options as params lines (after the user's overrides), or an error naming
 * the option. *text is malloc'd. */
static lv_status decode_overrides(const lv_decode_options *o, char **text) {
  *text = NULL;
  if (o->num_hyps < 0) return lv_status_make(LV_ERR_INVALID, "num_hyps = %d: expected >= 1 (0: the experiment's)", o->num_hyps);
  if (o->target_seq_len < 0)
    return lv_status_make(LV_ERR_INVALID, "target_seq_len = %d: expected >= 1 (0: the experiment's)", o->target_seq_len);
  if (o->batch_size < 0 || o->batch_size > 4096)
    return lv_status_make(LV_ERR_INVALID, "batch_size = %d: expected 1 to 4096 (0: %d)", o->batch_size, API_DEFAULT_BATCH);
  if (isnan(o->beam_size) || isnan(o->length_normalization) || isnan(o->coverage_penalty) ||
      isnan(o->fusion_lm_weight) || isnan(o->temperature))
    return lv_status_make(LV_ERR_INVALID, "decode options: NaN is not a value (< 0: the experiment's)");
  size_t len = 0;
  FILE *f = open_memstream(text, &len);
  LV_ASSERT(f);
  if (o->num_hyps > 0) fprintf(f, "task.decoder.beam_search.num_hyps_per_beam: %d\n", o->num_hyps);
  if (o->beam_size >= 0) fprintf(f, "task.decoder.beam_search.beam_size: %.17g\n", o->beam_size);
  if (o->length_normalization >= 0)
    fprintf(f, "task.decoder.beam_search.length_normalization: %.17g\n", o->length_normalization);
  if (o->coverage_penalty >= 0) fprintf(f, "task.decoder.beam_search.coverage_penalty: %.17g\n", o->coverage_penalty);
  if (o->target_seq_len > 0) fprintf(f, "task.decoder.target_seq_len: %d\n", o->target_seq_len);
  if (o->fusion_lm_weight >= 0) fprintf(f, "task.decoder.fusion.lm_weight: %.17g\n", o->fusion_lm_weight);
  if (o->temperature > 0) fprintf(f, "task.decoder.sample_temperature: %.17g\n", o->temperature);
  if (o->top_k >= 0) fprintf(f, "task.decoder.sample_top_k: %d\n", o->top_k);
  if (o->seed >= 0) fprintf(f, "task.decoder.sample_seed: %lld\n", (long long)o->seed);
  fclose(f);
  return NULL;
}

/* The session's frozen params: the model's experiment (or file) and overrides, then o's. */
static lv_status session_params(const lv_model *m, const lv_decode_options *o, lv_params **out) {
  char *flag_params = NULL;
  LV_TRY(decode_overrides(o, &flag_params));
  if (m->gpu) { /* as --run_locally=gpu: the variables and the step on cuda:0 */
    static const char kGpu[] = "cluster.worker.gpus_per_replica: 1\n";
    size_t n = strlen(flag_params);
    char *t = realloc(flag_params, n + sizeof kGpu);
    LV_ASSERT(t);
    memcpy(t + n, kGpu, sizeof kGpu);
    flag_params = t;
  }
  lv_model_options mo;
  lv_model_options_init(&mo);
  mo.model = m->model;
  mo.dataset = m->dataset;
  mo.experiments_dir = m->experiments_dir;
  mo.params_override = m->params_override;
  mo.params_file_override = m->params_file_override;
  mo.flag_params = flag_params;
  mo.logdir = m->logdir;
  mo.mode = "sync";
  mo.job = "decoder";
  mo.num_threads = m->num_threads;
  lv_status s = m->file ? lv_model_file_params(m->file, m->assets_dir, m->params_override, m->params_file_override,
                                               flag_params, m->num_threads, out)
                        : lv_model_params_build(&mo, out);
  free(flag_params);
  LV_TRY(s);
  int64_t t = lv_params_int(*out, "cluster.num_threads");
  if (t < 0 || t > LV_CLI_MAX_THREADS) {
    lv_params_free(*out);
    *out = NULL;
    return lv_status_make(LV_ERR_INVALID, "cluster.num_threads = %lld: expected 0 (one per core) to %d", (long long)t,
                          LV_CLI_MAX_THREADS);
  }
  return NULL;
}

static void session_free(lv_session *s) {
  if (!s) return;
  lv_line_decoder_close(s->ld); /* takes the scorers from the task first */
  for (int i = 0; i < s->n_lm; i++) session_free(s->lm[i]);
  free(s->lm);
  free(s->fusion);
  lv_params_free(s->cfg);
  free(s);
}

static lv_status session_make(lv_model *m, const lv_decode_options *o, const char *checkpoint, lv_session **out);

/* The options' language models as scorers of s's searches, after the params' fusion LM. */
static lv_status session_scorers(lv_session *s, const lv_decode_options *o) {
  if (o->n_scorers < 0 || o->n_scorers > 64 || (o->n_scorers > 0 && !o->scorers))
    return lv_status_make(LV_ERR_INVALID, "n_scorers = %d with scorers %s: expected 0 to 64 scorers", o->n_scorers,
                          o->scorers ? "given" : "NULL");
  if (!o->n_scorers) return NULL;
  s->lm = calloc((size_t)o->n_scorers, sizeof *s->lm);
  s->fusion = calloc((size_t)o->n_scorers, sizeof *s->fusion);
  LV_ASSERT(s->lm && s->fusion);
  lv_task *t = lv_line_decoder_instance(s->ld)->task;
  for (int i = 0; i < o->n_scorers; i++) {
    const lv_scorer_spec *sp = &o->scorers[i];
    if (!sp->model) return lv_status_make(LV_ERR_INVALID, "scorers[%d].model is NULL", i);
    if (!(sp->weight >= 0 && sp->weight <= 1e6))
      return lv_status_make(LV_ERR_INVALID, "scorers[%d].weight = %g: expected a value in [0, 1e6]", i, sp->weight);
    if (sp->model == s->m) return lv_status_make(LV_ERR_INVALID, "scorers[%d]: the model itself", i);
    LV_TRY(lv_status_wrap(session_make(sp->model, &sp->model->decode, sp->model->checkpoint, &s->lm[i]),
                          "scorers[%d] (%s)", i, sp->model->model));
    s->n_lm = i + 1;
    lv_instance *lm = lv_line_decoder_instance(s->lm[i]->ld);
    s->fusion[i] = (lv_lm_fusion){.lm = lm->task, .g = lm->graph, .weight = (float)sp->weight};
    LV_TRY(lv_status_wrap(lv_lm_fusion_check(t, s->cfg, s->lm[i]->cfg, sp->model->model, &s->fusion[i]),
                          "scorers[%d] (%s)", i, sp->model->model));
    LV_TRY(lv_status_wrap(lv_scorers_add(lv_line_decoder_scorers(s->ld), t, &s->fusion[i].scorer), "scorers[%d]", i));
  }
  return NULL;
}

/* A session of m restored from checkpoint (the model's prefix, or at load the user's). */
static lv_status session_make(lv_model *m, const lv_decode_options *o, const char *checkpoint, lv_session **out) {
  *out = NULL;
  lv_session *s = calloc(1, sizeof *s);
  if (!s) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  s->m = m;
  s->batch_size = o->batch_size > 0 ? o->batch_size : API_DEFAULT_BATCH;
  s->keep_going = o->keep_going != 0;
  lv_status st = session_params(m, o, &s->cfg);
  if (!st) st = lv_line_decoder_open(s->cfg, m->file, &s->ld);
  /* A later session of m reads the weights of m's own (the model's first) session. */
  if (!st && !(m->own && lv_line_decoder_share(s->ld, m->own->ld)))
    st = m->file ? lv_line_decoder_restore_file(s->ld, m->file) : lv_line_decoder_restore(s->ld, checkpoint, "checkpoint");
  if (!st) st = session_scorers(s, o);
  if (st) {
    session_free(s);
    return st;
  }
  *out = s;
  return NULL;
}

static char *dup_or_null(const char *s) {
  if (!s) return NULL;
  char *d = strdup(s);
  LV_ASSERT(d);
  return d;
}

static void model_free_fields(lv_model *m) {
  free(m->model);
  free(m->logdir);
  free(m->experiments_dir);
  free(m->dataset);
  free(m->params_override);
  free(m->params_file_override);
  free(m->checkpoint);
  free((void *)m->decode.scorers);
  free(m->sink.user);
  lv_model_file_free(m->file);
  lv_model_file_assets_remove(m->assets_dir);
}

/* The fields both loads take. */
static lv_status model_common(const lv_load_options *o, lv_model *m) {
  if (o->num_threads < 0 || o->num_threads > LV_CLI_MAX_THREADS)
    return lv_status_make(LV_ERR_INVALID, "num_threads = %d: expected 0 (the experiment's) to %d", o->num_threads,
                          LV_CLI_MAX_THREADS);
  m->params_override = dup_or_null(o->params_override);
  m->params_file_override = dup_or_null(o->params_file_override);
  if (o->gpu != 0 && o->gpu != 1) return lv_status_make(LV_ERR_INVALID, "gpu = %d: expected 0 (the CPU) or 1 (the first GPU)", o->gpu);
  if (o->gpu) {
    const int gpus = lv_cuda_device_count();
    if (gpus < 0)
      return lv_status_make(LV_ERR_INVALID, "gpu = 1: this library was built without CUDA (build it with `make "
                            "CUDA=1`); or load with gpu = 0, the CPU");
    if (gpus == 0)
      return lv_status_make(LV_ERR_INVALID, "gpu = 1: no GPU is visible to this process (CUDA found no device: check "
                            "nvidia-smi and CUDA_VISIBLE_DEVICES); or load with gpu = 0, the CPU");
  }
  m->num_threads = o->num_threads;
  m->gpu = o->gpu == 1;
  m->decode = o->decode;
  m->decode.scorers = NULL;
  if (o->decode.n_scorers > 0 && o->decode.scorers) {
    lv_scorer_spec *c = malloc(sizeof *c * (size_t)o->decode.n_scorers);
    LV_ASSERT(c);
    memcpy(c, o->decode.scorers, sizeof *c * (size_t)o->decode.n_scorers);
    m->decode.scorers = c;
  }
  return NULL;
}

static lv_status model_load_file(const char *path, const lv_load_options *o, lv_model *m) {
  if (!path || !*path) return lv_status_make(LV_ERR_INVALID, "lv_model_load_file: path is %s", path ? "empty" : "NULL");
  static const char *const kNot[] = {"model", "logdir", "checkpoint", "experiments_dir", "dataset"};
  const char *given[] = {o->model, o->logdir, o->checkpoint, o->experiments_dir, o->dataset};
  for (int i = 0; i < 5; i++)
    if (given[i] && *given[i])
      return lv_status_make(LV_ERR_INVALID, "lv_model_load_file: options.%s = %s: a model file holds the model (its "
                            "params, tokenizer and weights); leave %s NULL", kNot[i], given[i], kNot[i]);
  LV_TRY(model_common(o, m));
  m->model = dup_or_null(path);
  LV_TRY(lv_model_file_read(path, &m->file));
  LV_TRY(lv_model_file_assets_dir(m->file, m->assets_dir, sizeof m->assets_dir));
  LV_TRY(session_make(m, &o->decode, NULL, &m->own));
  m->checkpoint = dup_or_null(path);
  snprintf(m->task_cls, sizeof m->task_cls, "%s", lv_line_decoder_instance(m->own->ld)->task->cls->cls);
  return NULL;
}

static lv_status model_load(const lv_load_options *o, lv_model *m) {
  if (!o->model || !*o->model)
    return lv_status_make(LV_ERR_INVALID, "model: required (an experiment, e.g. mt.bible_en_es.TransformerSmall)");
  if (!o->logdir || !*o->logdir) return lv_status_make(LV_ERR_INVALID, "logdir: required (the trainer's --logdir)");
  LV_TRY(model_common(o, m));
  m->model = dup_or_null(o->model);
  m->logdir = dup_or_null(o->logdir);
  m->experiments_dir = dup_or_null(o->experiments_dir);
  m->dataset = dup_or_null(o->dataset && *o->dataset ? o->dataset : "Test");
  LV_TRY(session_make(m, &o->decode, o->checkpoint, &m->own));
  m->checkpoint = dup_or_null(lv_line_decoder_checkpoint(m->own->ld));
  snprintf(m->task_cls, sizeof m->task_cls, "%s", lv_line_decoder_instance(m->own->ld)->task->cls->cls);
  return NULL;
}

/* Loads with load (path: lv_model_load_file's) under the options' log sink. */
static lv_status load_with(const char *path, const lv_load_options *o, lv_model **out) {
  *out = NULL;
  lv_model *m = calloc(1, sizeof *m);
  if (!m) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  pthread_mutex_init(&m->mu, NULL);
  if (o->log) {
    api_log_user *u = malloc(sizeof *u);
    LV_ASSERT(u);
    *u = (api_log_user){.fn = o->log, .user = o->log_user};
    m->sink = (lv_log_sink){.active = true, .fn = api_log_forward, .user = u, .min_level = (lv_log_level)o->log_level};
  } else {
    m->sink = (lv_log_sink){.active = true};
  }
  lv_log_sink prev = lv_log_thread_sink_set(m->sink);
  lv_status s = path ? model_load_file(path, o, m) : model_load(o, m);
  lv_log_thread_sink_restore(prev);
  if (s) {
    lv_model_free(m);
    return s;
  }
  *out = m;
  return NULL;
}

lv_status lv_model_load(const lv_load_options *o, lv_model **out) {
  LV_ASSERT(o && out);
  return load_with(NULL, o, out);
}

lv_status lv_model_load_file(const char *path, const lv_load_options *o, lv_model **out) {
  LV_ASSERT(out);
  lv_load_options d;
  if (!o) lv_load_options_init(&d);
  lv_status s = load_with(path ? path : "", o ? o : &d, out);
  return s;
}

void lv_model_free(lv_model *m) {
  if (!m) return;
  lv_log_sink prev = lv_log_thread_sink_set(m->sink);
  session_free(m->own);
  lv_log_thread_sink_restore(prev);
  pthread_mutex_destroy(&m->mu);
  model_free_fields(m);
  free(m);
}

const char *lv_model_task(const lv_model *m) { return m->task_cls; }
const char *lv_model_checkpoint(const lv_model *m) { return m->checkpoint; }

lv_status lv_session_new(lv_model *m, const lv_decode_options *o, lv_session **out) {
  LV_ASSERT(m && out);
  lv_log_sink prev = lv_log_thread_sink_set(m->sink);
  lv_status s = session_make(m, o ? o : &m->decode, m->checkpoint, out);
  lv_log_thread_sink_restore(prev);
  return s;
}

void lv_session_free(lv_session *s) {
  if (!s) return;
  lv_log_sink prev = lv_log_thread_sink_set(s->m->sink);
  session_free(s);
  lv_log_thread_sink_restore(prev);
}

/* ---- calls ---- */

/* A call's session and its task: s, or the model's own (locked until call_end). */
typedef struct api_call {
  lv_model *m;
  lv_session *s;
  lv_task *t;
  lv_graph *g;
  lv_instance *inst;
  bool locked;
  lv_log_sink prev;
} api_call;

static void call_begin(api_call *c, lv_model *m, lv_session *s) {
  LV_ASSERT(m);
  LV_ASSERTF(!s || s->m == m, "a session of another model");
  c->m = m;
  c->locked = !s;
  if (!s) {
    pthread_mutex_lock(&m->mu);
    s = m->own;
  }
  c->s = s;
  c->inst = lv_line_decoder_instance(s->ld);
  c->t = c->inst->task;
  c->g = c->inst->graph;
  c->prev = lv_log_thread_sink_set(m->sink);
}

static lv_status call_end(api_call *c, lv_status st) {
  lv_log_thread_sink_restore(c->prev);
  if (c->locked) pthread_mutex_unlock(&c->m->mu);
  return st;
}

/* What each kind of model takes, for the wrong-kind error. */
static lv_status wrong_kind(const api_call *c, const char *call) {
  const lv_task_class *k = c->t->cls;
  const char *takes = k->classify                                    ? "lv_classify, lv_classify_files"
                      : k->samples_to_batch                          ? "lv_transcribe, lv_transcribe_files"
                      : k->decode_out_nbest && k->line_to_batch      ? "lv_translate"
                      : k->decode && k->line_to_batch                ? "lv_score_text, lv_sample_text"
                                                                     : "none of the library's calls";
  return lv_status_make(LV_ERR_INVALID, "%s: model %s (task %s) does not take it; it takes %s", call, c->m->model,
                        k->cls, takes);
}

/* Whether the task's line hooks take kind (line_describe's answer). */
static bool takes_kind(const api_call *c, const char *kind) {
  const lv_task_class *k = c->t->cls;
  if (!k->decode || !k->line_describe) return false;
  const char *verb, *note;
  lv_status s = k->line_describe(c->t, kind, &verb, &note);
  lv_status_free(s);
  return s == NULL;
}

/* The kinds of work the calls ask the tasks' line hooks for (models/task.h; each is the
 * bin/decoder flag of the same name), in the order of the bits of lv_session.described. */
static const char *const kKinds[] = {"decode_text", "decode_audio", "score_text", "sample"};

/* The first call of a kind on a session logs what it does with which checkpoint, as
 * bin/decoder has always said it (the task's verb and note). */
static void describe(api_call *c, const char *kind) {
  unsigned bit = 0;
  for (unsigned i = 0; i < sizeof kKinds / sizeof *kKinds; i++)
    if (!strcmp(kKinds[i], kind)) bit = 1u << i;
  if (c->s->described & bit) return;
  c->s->described |= bit;
  const char *verb = "", *note = "";
  lv_status_free(c->t->cls->line_describe(c->t, kind, &verb, &note));
  lv_info("%s: %s with %s (step %lld)%s", kind, verb, lv_line_decoder_checkpoint(c->s->ld),
          (long long)lv_instance_step(c->inst), note);
}

static lv_status check_count(const char *call, const char *what, int n) {
  if (n < 0 || n > API_MAX_ITEMS)
    return lv_status_make(LV_ERR_INVALID, "%s: %d %s: expected 0 to %d", call, n, what, API_MAX_ITEMS);
  return NULL;
}

static lv_nbest *nbest_new(int n) {
  lv_nbest *r = calloc(1, sizeof *r);
  LV_ASSERT(r);
  r->n_items = n;
  r->n = calloc((size_t)n + 1, sizeof *r->n);
  r->text = calloc((size_t)n + 1, sizeof *r->text);
  r->score = calloc((size_t)n + 1, sizeof *r->score);
  r->error = calloc((size_t)n + 1, sizeof *r->error);
  r->seconds = calloc((size_t)n + 1, sizeof *r->seconds);
  LV_ASSERT(r->n && r->text && r->score && r->error && r->seconds);
  return r;
}

void lv_nbest_free(lv_nbest *r) {
  if (!r) return;
  for (int i = 0; i < r->n_items; i++) {
    for (int h = 0; r->text[i] && h < r->n[i]; h++) free(r->text[i][h]);
    free(r->text[i]);
    free(r->score[i]);
    free(r->error[i]);
  }
  free(r->error);
  free(r->seconds);
  free(r->n);
  free(r->text);
  free(r->score);
  free(r);
}

/* Item i of dec_out (NULL: nothing decoded; the task may still report the item's error)
 * into r's entry `at`, up to k hyps. */
static lv_status take_nbest(const api_call *c, const lv_decode_out *dec_out, int i, int k, lv_nbest *r, int at) {
  r->text[at] = calloc((size_t)k, sizeof **r->text);
  r->score[at] = calloc((size_t)k, sizeof **r->score);
  LV_ASSERT(r->text[at] && r->score[at]);
  return c->t->cls->decode_out_nbest(c->t, dec_out, i, k, r->text[at], r->score[at], &r->n[at]);
}

lv_status lv_translate(lv_model *m, lv_session *s, const char *const *src, int n, int k, lv_nbest **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!takes_kind(&c, "decode_text") || !c.t->cls->line_to_batch || !c.t->cls->decode_out_nbest)
    return call_end(&c, wrong_kind(&c, "lv_translate"));
  lv_status st = check_count("lv_translate", "sources", n);
  if (st) return call_end(&c, st);
  describe(&c, "decode_text");
  if (k <= 0) k = 1;
  lv_nbest *r = nbest_new(n);
  lv_batch b;
  lv_batch_init(&b);
  for (int i = 0; !st && i < n; i++) {
    if (!src[i]) {
      st = lv_status_make(LV_ERR_INVALID, "source %d is NULL", i);
      break;
    }
    bool empty = true;
    st = c.t->cls->line_to_batch(c.t, "decode_text", src[i], strlen(src[i]), c.s->lines_seen + i + 1, &b, &empty);
    lv_decode_out dec;
    lv_decode_out_init(&dec);
    if (!st && !empty) st = lv_task_decode(c.t, c.g, &b, &dec);
    if (!st) st = take_nbest(&c, empty ? NULL : &dec, 0, k, r, i);
    lv_decode_out_free(&dec);
    if (st) st = lv_status_wrap(st, "lv_translate: source %d", i);
  }
  c.s->lines_seen += n;
  lv_batch_free(&b);
  if (st) lv_nbest_free(r);
  else *out = r;
  return call_end(&c, st);
}

/* Decodes the batch lines_to_batch or samples_to_batch made of items [first, first + n)
 * into r; with keep_going an item's own error (a file that could not be read) is its
 * r->error. */
static lv_status nbest_batch(const api_call *c, lv_batch *b, bool empty, int first, int n, int k, lv_nbest *r) {
  lv_decode_out dec;
  lv_decode_out_init(&dec);
  lv_status st = empty ? NULL : lv_task_decode(c->t, c->g, b, &dec);
  for (int i = 0; !st && i < n; i++) {
    st = take_nbest(c, empty ? NULL : &dec, i, k, r, first + i);
    if (c->t->cls->item_seconds) r->seconds[first + i] = c->t->cls->item_seconds(c->t, i);
    if (st && c->s->keep_going) {
      r->error[first + i] = strdup(lv_status_msg(st));
      LV_ASSERT(r->error[first + i]);
      lv_status_free(st);
      st = NULL;
    }
    if (st) st = lv_status_wrap(st, "item %d", first + i);
  }
  lv_decode_out_free(&dec);
  return st;
}

static int batch_limit(const api_call *c) {
  return c->t->cls->line_batch_limit ? c->t->cls->line_batch_limit(c->t, "decode_audio") : 0;
}

int lv_transcribe_batch_limit(lv_model *m) {
  api_call c;
  call_begin(&c, m, NULL);
  const int lim = c.t->cls->samples_to_batch ? batch_limit(&c) : 0;
  call_end(&c, NULL);
  return lim;
}

lv_status lv_transcribe_files(lv_model *m, lv_session *s, const char *const *paths, int n, int k, lv_nbest **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!takes_kind(&c, "decode_audio") || !c.t->cls->lines_to_batch || !c.t->cls->decode_out_nbest)
    return call_end(&c, wrong_kind(&c, "lv_transcribe_files"));
  lv_status st = check_count("lv_transcribe_files", "paths", n);
  if (st) return call_end(&c, st);
  if (k <= 0) k = 1;
  for (int i = 0; i < n; i++)
    if (!paths[i] || !*paths[i])
      return call_end(&c, lv_status_make(LV_ERR_INVALID, "lv_transcribe_files: path %d is %s", i,
                                         paths[i] ? "empty" : "NULL"));
  describe(&c, "decode_audio");
  int batch = c.s->batch_size;
  const int lim = batch_limit(&c); /* silently: lv_transcribe_batch_limit tells it */
  if (lim > 0 && batch > lim) batch = lim;
  lv_nbest *r = nbest_new(n);
  lv_batch b;
  lv_batch_init(&b);
  size_t *lens = calloc((size_t)batch, sizeof *lens);
  LV_ASSERT(lens);
  for (int first = 0; !st && first < n; first += batch) {
    const int nb = n - first < batch ? n - first : batch;
    for (int i = 0; i < nb; i++) lens[i] = strlen(paths[first + i]);
    bool empty = true;
    st = c.t->cls->lines_to_batch(c.t, "decode_audio", paths + first, lens, nb, first + 1, &b, &empty);
    if (!st) st = nbest_batch(&c, &b, empty, first, nb, k, r);
  }
  free(lens);
  lv_batch_free(&b);
  if (st) {
    lv_nbest_free(r);
    st = lv_status_wrap(st, "lv_transcribe_files");
  } else {
    *out = r;
  }
  return call_end(&c, st);
}

lv_status lv_transcribe(lv_model *m, lv_session *s, const float *samples, int64_t n_samples, int k, lv_nbest **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!c.t->cls->samples_to_batch || !c.t->cls->decode_out_nbest) return call_end(&c, wrong_kind(&c, "lv_transcribe"));
  if (n_samples < 0 || (n_samples > 0 && !samples))
    return call_end(&c, lv_status_make(LV_ERR_INVALID, "lv_transcribe: %lld samples at %p", (long long)n_samples,
                                       (const void *)samples));
  for (int64_t i = 0; i < n_samples; i++)
    if (!isfinite(samples[i]))
      return call_end(&c, lv_status_make(LV_ERR_INVALID, "lv_transcribe: sample %lld is not finite", (long long)i));
  if (k <= 0) k = 1;
  lv_nbest *r = nbest_new(1);
  lv_batch b;
  lv_batch_init(&b);
  bool empty = true;
  lv_status st = c.t->cls->samples_to_batch(c.t, &samples, &n_samples, 1, &b, &empty);
  if (!st) st = nbest_batch(&c, &b, empty, 0, 1, k, r);
  lv_batch_free(&b);
  if (st) {
    lv_nbest_free(r);
    st = lv_status_wrap(st, "lv_transcribe");
  } else {
    *out = r;
  }
  return call_end(&c, st);
}

void lv_scores_free(lv_scores *r) {
  if (!r) return;
  for (int i = 0; i < r->n_items; i++) free(r->token_logprob[i]);
  free(r->logprob);
  free(r->n_tokens);
  free(r->token_logprob);
  free(r);
}

/* One line's decode output ("score": [log-prob, tokens]; "token_logprobs") into r[i]. */
static lv_status take_score(const lv_decode_out *dec, lv_scores *r, int i) {
  const lv_tensor *sc = lv_decode_out_get(dec, "score"), *tl = lv_decode_out_get(dec, "token_logprobs");
  if (!sc || !tl) return lv_status_make(LV_ERR_INTERNAL, "the decode gave no score / token_logprobs");
  r->logprob[i] = lv_f32(sc)[0];
  r->n_tokens[i] = (int)lv_tensor_numel(tl);
  r->token_logprob[i] = malloc(sizeof(float) * ((size_t)r->n_tokens[i] + 1));
  LV_ASSERT(r->token_logprob[i]);
  memcpy(r->token_logprob[i], tl->data, sizeof(float) * (size_t)r->n_tokens[i]);
  return NULL;
}

lv_status lv_score_text(lv_model *m, lv_session *s, const char *const *lines, int n, lv_scores **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!takes_kind(&c, "score_text") || !c.t->cls->line_to_batch) return call_end(&c, wrong_kind(&c, "lv_score_text"));
  lv_status st = check_count("lv_score_text", "lines", n);
  if (st) return call_end(&c, st);
  describe(&c, "score_text");
  lv_scores *r = calloc(1, sizeof *r);
  LV_ASSERT(r);
  r->n_items = n;
  r->logprob = calloc((size_t)n + 1, sizeof *r->logprob);
  r->n_tokens = calloc((size_t)n + 1, sizeof *r->n_tokens);
  r->token_logprob = calloc((size_t)n + 1, sizeof *r->token_logprob);
  LV_ASSERT(r->logprob && r->n_tokens && r->token_logprob);
  lv_batch b;
  lv_batch_init(&b);
  for (int i = 0; !st && i < n; i++) {
    if (!lines[i]) {
      st = lv_status_make(LV_ERR_INVALID, "lv_score_text: line %d is NULL", i);
      break;
    }
    bool empty = true;
    st = c.t->cls->line_to_batch(c.t, "score_text", lines[i], strlen(lines[i]), c.s->lines_seen + i + 1, &b, &empty);
    lv_decode_out dec;
    lv_decode_out_init(&dec);
    if (!st && !empty) st = lv_task_decode(c.t, c.g, &b, &dec);
    if (!st && !empty) st = take_score(&dec, r, i);
    lv_decode_out_free(&dec);
    if (st) st = lv_status_wrap(st, "lv_score_text: line %d", i);
  }
  c.s->lines_seen += n;
  lv_batch_free(&b);
  if (st) lv_scores_free(r);
  else *out = r;
  return call_end(&c, st);
}

void lv_texts_free(lv_texts *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) free(r->text[i]);
  free(r->text);
  free(r);
}

lv_status lv_sample_text(lv_model *m, lv_session *s, const char *prefix, int n, lv_texts **out) {
  return lv_sample_text_from(m, s, prefix, 0, n, out);
}

lv_status lv_sample_text_from(lv_model *m, lv_session *s, const char *prefix, int64_t first, int n, lv_texts **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!takes_kind(&c, "sample") || !c.t->cls->line_to_batch || !c.t->cls->decode_out_to_line)
    return call_end(&c, wrong_kind(&c, "lv_sample_text"));
  lv_status st = check_count("lv_sample_text", "samples", n);
  if (!st && (first < 0 || first > INT64_MAX - n))
    st = lv_status_make(LV_ERR_INVALID, "lv_sample_text_from: first sample %lld: expected >= 0", (long long)first);
  if (st) return call_end(&c, st);
  describe(&c, "sample");
  if (!prefix) prefix = "";
  lv_texts *r = calloc(1, sizeof *r);
  LV_ASSERT(r);
  r->text = calloc((size_t)n + 1, sizeof *r->text);
  LV_ASSERT(r->text);
  lv_batch b;
  lv_batch_init(&b);
  /* Sample i is bin/decoder --sample's line i + 1: the seed's stream i + 1. */
  for (int i = 0; !st && i < n; i++) {
    bool empty = true;
    st = c.t->cls->line_to_batch(c.t, "sample", prefix, strlen(prefix), first + i + 1, &b, &empty);
    if (!st) st = lv_task_decode_line(c.t, c.g, &b, &r->text[i]);
    if (!st) r->n = i + 1;
    if (st) st = lv_status_wrap(st, "lv_sample_text: sample %lld", (long long)(first + i));
  }
  lv_batch_free(&b);
  if (st) {
    for (int i = 0; i < n; i++) free(r->text[i]);
    r->n = 0;
    lv_texts_free(r);
  } else {
    *out = r;
  }
  return call_end(&c, st);
}

void lv_class_probs_free(lv_class_probs *r) {
  if (!r) return;
  free(r->probs);
  free(r);
}

/* lv_classify on a begun call. */
static lv_status classify_images(const api_call *c, const uint8_t *images, int n, int height, int width, int channels,
                                 lv_class_probs **out) {
  lv_status st = check_count("lv_classify", "images", n);
  if (!st && (height <= 0 || width <= 0 || channels <= 0))
    st = lv_status_make(LV_ERR_INVALID, "lv_classify: image shape [%d, %d, %d]: expected positive sizes", height, width,
                        channels);
  if (!st && n > 0 && !images) st = lv_status_make(LV_ERR_INVALID, "lv_classify: images is NULL");
  if (st) return st;
  lv_class_probs *r = calloc(1, sizeof *r);
  LV_ASSERT(r);
  r->n = n;
  const int64_t per = (int64_t)height * width * channels;
  lv_batch b;
  lv_batch_init(&b);
  for (int first = 0; !st && first < n; first += c->s->batch_size) {
    const int nb = n - first < c->s->batch_size ? n - first : c->s->batch_size;
    lv_tensor raw = lv_tensor_view(LV_U8, lv_shape4(nb, height, width, channels), (void *)(images + first * per));
    lv_nmap_clear(&b.map);
    b.size = nb;
    st = lv_nmap_set(&b.map, "raw", &raw);
    lv_tensor *p = NULL;
    if (!st) st = c->t->cls->classify(c->t, c->g, &b, &p);
    if (!st) {
      const int C = (int)p->shape.d[1];
      if (!r->probs) {
        r->num_classes = C;
        r->probs = malloc(sizeof(float) * ((size_t)n * (size_t)C + 1));
        LV_ASSERT(r->probs);
      }
      memcpy(r->probs + (size_t)first * (size_t)C, p->data, sizeof(float) * (size_t)nb * (size_t)C);
    }
    lv_tensor_free(p);
    if (st) st = lv_status_wrap(st, "lv_classify: images %d-%d", first, first + nb - 1);
  }
  lv_batch_free(&b);
  if (st) lv_class_probs_free(r);
  else *out = r;
  return st;
}

lv_status lv_classify(lv_model *m, lv_session *s, const uint8_t *images, int n, int height, int width, int channels,
                      lv_class_probs **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!c.t->cls->classify) return call_end(&c, wrong_kind(&c, "lv_classify"));
  return call_end(&c, classify_images(&c, images, n, height, width, channels, out));
}

lv_status lv_classify_files(lv_model *m, lv_session *s, const char *const *paths, int n, lv_class_probs **out) {
  LV_ASSERT(out);
  *out = NULL;
  api_call c;
  call_begin(&c, m, s);
  if (!c.t->cls->classify) return call_end(&c, wrong_kind(&c, "lv_classify_files"));
  lv_status st = check_count("lv_classify_files", "paths", n);
  int64_t shape[3] = {0, 0, 0};
  if (!st && lv_pvalue_to_ints(lv_params_list(c.s->cfg, "input.data_shape"), shape, 3) != 3)
    st = lv_status_make(LV_ERR_INVALID, "lv_classify_files: input.data_shape is not [height, width, depth]");
  if (st) return call_end(&c, st);
  const size_t per = (size_t)(shape[0] * shape[1] * shape[2]);
  uint8_t *all = malloc(per * (size_t)n + 1);
  LV_ASSERT(all);
  for (int i = 0; !st && i < n; i++) {
    if (!paths[i] || !*paths[i]) {
      st = lv_status_make(LV_ERR_INVALID, "lv_classify_files: path %d is %s", i, paths[i] ? "empty" : "NULL");
      break;
    }
    int h = 0, w = 0;
    uint8_t *px = NULL;
    st = lv_png_decode_file(paths[i], (int)shape[2], &h, &w, &px);
    if (!st && (h != shape[0] || w != shape[1]))
      st = lv_status_make(LV_ERR_INVALID, "image %s is %dx%d; the model takes %lldx%lld (input.data_shape)", paths[i],
                          w, h, (long long)shape[1], (long long)shape[0]);
    if (!st) memcpy(all + per * (size_t)i, px, per);
    free(px);
  }
  if (!st) st = classify_images(&c, all, n, (int)shape[0], (int)shape[1], (int)shape[2], out);
  free(all);
  return call_end(&c, st ? lv_status_wrap(st, "lv_classify_files") : NULL);
}
