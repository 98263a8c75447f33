/* The library API (include/lingvoc.h) on the decoder's golden Transformer
 * (tests/data/decode_golden): lv_translate's best hypotheses are the fixture's
 * --decode_text lines; n-best is sorted and starts with the best; two threads with a
 * session each give what one thread gives; the library writes nothing to stderr and sends
 * its warnings to the log callback; every error path (missing model, logdir or
 * checkpoint, an unknown key, bad options, the wrong kind of model for a call) is an
 * error of the right kind whose message names what is at fault. Scorers
 * (tests/data/lines_golden's tiny LAS and RNN LM, both over AsciiTokenizer's 76 ids): a
 * session with the LM in its scorer list at weight w gives the n-best (texts and scores,
 * bit for bit) of task.decoder.fusion at lm_weight w; at weight 0 that of no LM; the LM
 * twice at weights a and b that of it once at a + b (scores to 1e-4); a scorer that is no
 * LM, a negative weight and a NULL model are errors naming scorers[i]. Only the public
 * header is included. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#include "lingvoc.h"

#define G "tests/data/decode_golden"
#define OV                                                                                                      \
  "input.file_pattern: " G "/mt/train.tfrecord@1; task.decoder.target_seq_len: 40; "                          \
  "task.decoder.beam_search.num_hyps_per_beam: 4; input.tokenizer.cls: WpmTokenizer; input.tokenizer.vocab_filepath: " \
  G "/mt/wpm.voc; input.tokenizer.vocab_size: 128"

static char g_dir[] = "/tmp/lingvoc-check-api.XXXXXX";

static void expect_error(lv_status s, int code, const char *a, const char *b);

static void options(lv_load_options *o) {
  lv_load_options_init(o);
  o->model = "mt.bible_en_es.TinyTest";
  o->logdir = g_dir;
  o->checkpoint = G "/transformer/ckpt-00000020";
  o->params_override = OV;
  o->num_threads = 1;
}

/* Lines of a file (at most 64), without their ends. */
static int read_lines(const char *path, char lines[64][512]) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "%s", path);
  int n = 0;
  while (n < 64 && fgets(lines[n], 512, f)) lines[n][strcspn(lines[n], "\n")] = 0, n++;
  fclose(f);
  return n;
}

static lv_model *load(void) {
  lv_load_options o;
  options(&o);
  lv_model *m = NULL;
  lv_status s = lv_model_load(&o, &m);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  return m;
}

#define LG "tests/data/lines_golden"
#define LM_OV "input.file_pattern: \"text:" LG "/lm/train.txt\""

/* A tiny model of tests/data/lines_golden (checkpoint under LG). */
static lv_model *load_tiny(const char *model, const char *checkpoint, const char *override) {
  lv_load_options o;
  lv_load_options_init(&o);
  o.model = model;
  o.logdir = g_dir;
  o.checkpoint = checkpoint;
  o.params_override = override;
  o.num_threads = 1;
  lv_model *m = NULL;
  lv_status s = lv_model_load(&o, &m);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  return m;
}

/* The n-best of the two utterances through session options o (NULL: the model's). */
static lv_nbest *transcribe_with(lv_model *m, const lv_decode_options *o) {
  static const char *const wavs[2] = {LG "/las/yes_go.wav", LG "/las/no_stop.wav"};
  lv_session *s = NULL;
  lv_status st = lv_session_new(m, o, &s);
  ck_assert_msg(!st, "%s", lv_status_msg(st));
  lv_nbest *r = NULL;
  st = lv_transcribe_files(m, s, wavs, 2, 4, &r);
  ck_assert_msg(!st, "%s", lv_status_msg(st));
  lv_session_free(s);
  return r;
}

/* a and b: the same texts, scores within tol (0: bit for bit). */
static void same_nbest(const lv_nbest *a, const lv_nbest *b, float tol, const char *what) {
  ck_assert_int_eq(a->n_items, b->n_items);
  for (int i = 0; i < a->n_items; i++) {
    ck_assert_msg(a->n[i] == b->n[i], "%s: item %d: %d vs %d hyps", what, i, a->n[i], b->n[i]);
    for (int h = 0; h < a->n[i]; h++) {
      ck_assert_msg(!strcmp(a->text[i][h], b->text[i][h]), "%s: item %d hyp %d: '%s' vs '%s'", what, i, h,
                    a->text[i][h], b->text[i][h]);
      const float d = a->score[i][h] - b->score[i][h];
      ck_assert_msg(tol ? d <= tol && d >= -tol : a->score[i][h] == b->score[i][h], "%s: item %d hyp %d: %.9g vs %.9g",
                    what, i, h, a->score[i][h], b->score[i][h]);
    }
  }
}

static lv_model *load_las(const char *override) {
  return load_tiny("asr.bible_tts.TinyTest", LG "/las/ckpt-00000020", override);
}

START_TEST(test_scorers) {
  lv_model *lm = load_tiny("lm.bible.RnnLmTinyTest", LG "/lm/ckpt-00000020", LM_OV);
  lv_model *las = load_las(NULL);
  lv_model *fused = load_las("task.decoder.fusion.lm_model: lm.bible.RnnLmTinyTest; task.decoder.fusion.lm_checkpoint: "
                             LG "/lm/ckpt-00000020; task.decoder.fusion.lm_params_override: '" LM_OV "'; "
                             "task.decoder.fusion.lm_weight: 0.75");
  lv_decode_options o;
  lv_decode_options_init(&o);
  o.num_hyps = 4;
  lv_nbest *plain = transcribe_with(las, &o);
  lv_nbest *params = transcribe_with(fused, &o);
  lv_scorer_spec one = {.model = lm, .weight = 0.75};
  o.scorers = &one;
  o.n_scorers = 1;
  lv_nbest *listed = transcribe_with(las, &o);
  same_nbest(params, listed, 0, "a list of one LM at 0.75 = task.decoder.fusion at 0.75");
  one.weight = 0;
  lv_nbest *zero = transcribe_with(las, &o);
  same_nbest(plain, zero, 0, "an LM at weight 0 = no LM");
  int differ = 0;
  for (int i = 0; i < 2; i++) differ += plain->score[i][0] != listed->score[i][0];
  ck_assert_msg(differ, "the LM at 0.75 changes the scores");
  lv_scorer_spec two[2] = {{.model = lm, .weight = 0.5}, {.model = lm, .weight = 0.25}};
  o.scorers = two;
  o.n_scorers = 2;
  lv_nbest *pair = transcribe_with(las, &o);
  same_nbest(listed, pair, 1e-4f, "the LM at 0.5 and at 0.25 = once at 0.75");
  lv_session *s = NULL;
  two[1].weight = -1;
  expect_error(lv_session_new(las, &o, &s), LV_STATUS_INVALID, "scorers[1].weight = -1", "[0, 1e6]");
  two[1] = (lv_scorer_spec){.model = las, .weight = 1};
  expect_error(lv_session_new(las, &o, &s), LV_STATUS_INVALID, "scorers[1]", "the model itself");
  two[1] = (lv_scorer_spec){.model = fused, .weight = 1};
  expect_error(lv_session_new(las, &o, &s), LV_STATUS_INVALID, "scorers[1]", "not an lm.model.LanguageModel");
  two[1].model = NULL;
  expect_error(lv_session_new(las, &o, &s), LV_STATUS_INVALID, "scorers[1].model is NULL", "NULL");
  lv_nbest_free(plain);
  lv_nbest_free(params);
  lv_nbest_free(listed);
  lv_nbest_free(zero);
  lv_nbest_free(pair);
  lv_model_free(fused);
  lv_model_free(las);
  lv_model_free(lm);
}
END_TEST

START_TEST(test_version) {
  ck_assert_str_eq(lv_version(), LINGVOC_VERSION);
  ck_assert_int_eq(lv_status_error(NULL), LV_STATUS_OK);
}
END_TEST

START_TEST(test_translate_golden) {
  char src[64][512], want[64][512];
  int n = read_lines(G "/mt/text.in", src), nw = read_lines(G "/transformer/expected/decode_text.out", want);
  ck_assert_int_eq(n, nw);
  /* Silence stderr's fd: the library must not write there. */
  fflush(stderr);
  char errpath[256];
  snprintf(errpath, sizeof errpath, "%s/stderr", g_dir);
  int saved = dup(2);
  FILE *ef = fopen(errpath, "w");
  ck_assert(ef && saved >= 0);
  dup2(fileno(ef), 2);
  lv_model *m = load();
  ck_assert_str_eq(lv_model_task(m), "mt.model.TransformerModel");
  const char *p[64];
  for (int i = 0; i < n; i++) p[i] = src[i];
  lv_nbest *r = NULL;
  lv_status s = lv_translate(m, NULL, p, n, 1, &r);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(ef);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  ck_assert_int_eq(r->n_items, n);
  for (int i = 0; i < n; i++) ck_assert_str_eq(r->n[i] ? r->text[i][0] : "", want[i]);
  lv_nbest_free(r);
  FILE *chk = fopen(errpath, "r");
  fseek(chk, 0, SEEK_END);
  ck_assert_msg(ftell(chk) == 0, "the library wrote %ld bytes to stderr", ftell(chk));
  fclose(chk);
  /* n-best: up to 4 (num_hyps_per_beam), best first, the first the 1-best. */
  s = lv_translate(m, NULL, p, n, 8, &r);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  for (int i = 0; i < n; i++) {
    ck_assert_int_le(r->n[i], 4);
    if (r->n[i]) ck_assert_str_eq(r->text[i][0], want[i]);
    for (int h = 1; h < r->n[i]; h++) ck_assert_float_le(r->score[i][h], r->score[i][h - 1]);
  }
  lv_nbest_free(r);
  lv_model_free(m);
}
END_TEST

typedef struct worker {
  lv_model *m;
  const char **src;
  int n;
  lv_nbest *r;
  lv_status s;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  lv_session *ss = NULL;
  w->s = lv_session_new(w->m, NULL, &ss);
  for (int rep = 0; !w->s && rep < 2; rep++) {
    lv_nbest_free(w->r);
    w->s = lv_translate(w->m, ss, w->src, w->n, 4, &w->r);
  }
  lv_session_free(ss);
  return NULL;
}

START_TEST(test_threads) {
  char src[64][512];
  int n = read_lines(G "/mt/text.in", src);
  const char *p[64];
  for (int i = 0; i < n; i++) p[i] = src[i];
  lv_model *m = load();
  lv_nbest *one = NULL;
  lv_status s = lv_translate(m, NULL, p, n, 4, &one);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  worker w[2] = {{.m = m, .src = p, .n = n}, {.m = m, .src = p, .n = n}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int t = 0; t < 2; t++) {
    ck_assert_msg(!w[t].s, "%s", lv_status_msg(w[t].s));
    for (int i = 0; i < n; i++) {
      ck_assert_int_eq(w[t].r->n[i], one->n[i]);
      for (int h = 0; h < one->n[i]; h++) {
        ck_assert_str_eq(w[t].r->text[i][h], one->text[i][h]);
        ck_assert_float_eq(w[t].r->score[i][h], one->score[i][h]);
      }
    }
    lv_nbest_free(w[t].r);
  }
  lv_nbest_free(one);
  lv_model_free(m);
}
END_TEST

/* A session's own options: num_hyps 2 keeps at most 2 hyps (the model's 4); bad ones
 * are errors naming the option or param. */
START_TEST(test_session_options) {
  lv_model *m = load();
  lv_decode_options d;
  lv_decode_options_init(&d);
  d.num_hyps = 2;
  lv_session *ss = NULL;
  lv_status s = lv_session_new(m, &d, &ss);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  const char *src[1] = {"veto ripa ne veto."};
  lv_nbest *r = NULL;
  s = lv_translate(m, ss, src, 1, 8, &r);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  ck_assert_int_le(r->n[0], 2);
  lv_nbest_free(r);
  lv_session_free(ss);
  d.length_normalization = 0.0 / 0.0;
  expect_error(lv_session_new(m, &d, &ss), LV_STATUS_INVALID, "NaN", NULL);
  lv_decode_options_init(&d);
  d.top_k = 3;
  expect_error(lv_session_new(m, &d, &ss), LV_STATUS_INVALID, "sample_top_k", NULL);
  lv_model_free(m);
}
END_TEST

typedef struct logged {
  int n;
  char last[512];
} logged;

static void on_log(void *user, int level, const char *message) {
  logged *l = user;
  if (level >= 2) {
    l->n++;
    snprintf(l->last, sizeof l->last, "%s", message);
  }
}

START_TEST(test_log_callback) {
  lv_load_options o;
  options(&o);
  logged l = {0};
  o.log = on_log;
  o.log_user = &l;
  lv_model *m = NULL;
  lv_status s = lv_model_load(&o, &m);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  const char *src[2] = {"veto \xff ripa", ""};
  lv_nbest *r = NULL;
  s = lv_translate(m, NULL, src, 2, 1, &r);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  ck_assert_int_eq(r->n[0], 0); /* invalid UTF-8: nothing decoded, a warning */
  ck_assert_int_eq(r->n[1], 0); /* an empty line */
  ck_assert_int_ge(l.n, 1);
  ck_assert_msg(strstr(l.last, "invalid UTF-8"), "%s", l.last);
  lv_nbest_free(r);
  lv_model_free(m);
}
END_TEST

/* s is an error of kind code whose message has each of the strings; frees s. */
static void expect_error(lv_status s, int code, const char *a, const char *b) {
  ck_assert_msg(s, "expected an error with '%s'", a);
  ck_assert_msg(lv_status_error(s) == code, "kind %d, want %d: %s", lv_status_error(s), code, lv_status_msg(s));
  ck_assert_msg(strstr(lv_status_msg(s), a), "'%s' lacks '%s'", lv_status_msg(s), a);
  if (b) ck_assert_msg(strstr(lv_status_msg(s), b), "'%s' lacks '%s'", lv_status_msg(s), b);
  lv_status_free(s);
}

static lv_status try_load(lv_load_options *o) {
  lv_model *m = NULL;
  lv_status s = lv_model_load(o, &m);
  ck_assert(s ? m == NULL : m != NULL);
  lv_model_free(m);
  return s;
}

START_TEST(test_load_errors) {
  lv_load_options o;
  options(&o);
  o.model = NULL;
  expect_error(try_load(&o), LV_STATUS_INVALID, "model: required", NULL);
  options(&o);
  o.logdir = "";
  expect_error(try_load(&o), LV_STATUS_INVALID, "logdir: required", NULL);
  options(&o);
  o.model = "mt.bible_en_es.NoSuchGroup";
  expect_error(try_load(&o), LV_STATUS_NOT_FOUND, "NoSuchGroup", NULL);
  options(&o);
  o.checkpoint = G "/transformer/ckpt-99999999";
  expect_error(try_load(&o), LV_STATUS_NOT_FOUND, "ckpt-99999999", NULL);
  options(&o);
  o.checkpoint = NULL; /* the latest in <logdir>/train, which does not exist */
  expect_error(try_load(&o), LV_STATUS_NOT_FOUND, "no checkpoint", "/train");
  options(&o);
  o.params_override = OV "; task.decoder.no_such_key: 3";
  expect_error(try_load(&o), LV_STATUS_INVALID, "no_such_key", NULL);
  options(&o);
  o.decode.num_hyps = -2;
  expect_error(try_load(&o), LV_STATUS_INVALID, "num_hyps = -2", NULL);
  options(&o);
  o.decode.batch_size = 100000;
  expect_error(try_load(&o), LV_STATUS_INVALID, "batch_size = 100000", NULL);
  options(&o);
  o.num_threads = -1;
  expect_error(try_load(&o), LV_STATUS_INVALID, "num_threads = -1", NULL);
  options(&o);
  o.decode.temperature = 0.5; /* a sampling option for a translation model */
  expect_error(try_load(&o), LV_STATUS_INVALID, "sample_temperature", NULL);
}
END_TEST

START_TEST(test_wrong_kind) {
  lv_model *m = load();
  const char *lines[1] = {"veto ripa"};
  lv_scores *sc = NULL;
  expect_error(lv_score_text(m, NULL, lines, 1, &sc), LV_STATUS_INVALID, "lv_score_text", "takes lv_translate");
  ck_assert(!sc);
  lv_texts *tx = NULL;
  expect_error(lv_sample_text(m, NULL, "", 1, &tx), LV_STATUS_INVALID, "lv_sample_text", "mt.model.TransformerModel");
  lv_class_probs *cp = NULL;
  uint8_t img[4] = {0};
  expect_error(lv_classify(m, NULL, img, 1, 2, 2, 1, &cp), LV_STATUS_INVALID, "lv_classify", "takes lv_translate");
  lv_nbest *nb = NULL;
  float smp[16] = {0};
  expect_error(lv_transcribe(m, NULL, smp, 16, 1, &nb), LV_STATUS_INVALID, "lv_transcribe", NULL);
  expect_error(lv_transcribe_files(m, NULL, lines, 1, 1, &nb), LV_STATUS_INVALID, "lv_transcribe_files", NULL);
  expect_error(lv_translate(m, NULL, lines, -1, 1, &nb), LV_STATUS_INVALID, "-1 sources", NULL);
  const char *null_src[1] = {NULL};
  expect_error(lv_translate(m, NULL, null_src, 1, 1, &nb), LV_STATUS_INVALID, "source 0 is NULL", NULL);
  ck_assert(!nb);
  /* Zero inputs are fine. */
  lv_status s = lv_translate(m, NULL, lines, 0, 1, &nb);
  ck_assert_msg(!s, "%s", lv_status_msg(s));
  ck_assert_int_eq(nb->n_items, 0);
  lv_nbest_free(nb);
  lv_model_free(m);
}
END_TEST

int main(void) {
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  Suite *s = suite_create("api");
  TCase *tc = tcase_create("api");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_version);
  tcase_add_test(tc, test_translate_golden);
  tcase_add_test(tc, test_threads);
  tcase_add_test(tc, test_session_options);
  tcase_add_test(tc, test_log_callback);
  tcase_add_test(tc, test_load_errors);
  tcase_add_test(tc, test_wrong_kind);
  tcase_add_test(tc, test_scorers);
  suite_add_tcase(s, tc);
  int rc = lv_test_run(s);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
