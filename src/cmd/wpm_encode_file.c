/* wpm_encode_file (Lingvo's lingvo/tools/wpm_encode_file.py): parallel source/target
 * text files -> TFRecord files of MT tf.Examples in the layout NmtInput reads
 * (src/input/nmt_input.c; Lingvo's wmt14_ende_wpm_32k records):
 *
 *   source_id      int64  pieces(source) + </s>
 *   source_padding float  zeros, as long as source_id
 *   source_word    bytes  the piece strings of source_id ("</s>" last)
 *   target_id      int64  <s> + pieces(target)
 *   target_padding float  zeros, as long as target_id
 *   target_word    bytes  the piece strings of target_id ("<s>" first)
 *   target_label   int64  pieces(target) + </s>
 *   target_weight  float  ones, as long as target_label
 *   natural_order  int64  [1]
 *
 * Each line is preprocessed as Lingvo does: surrounding whitespace stripped (ASCII
 * whitespace here; Python's strip() also strips Unicode spaces), every " </s>" removed;
 * a line that then starts with <s>/<S> or ends with </s>/</S> is an error (Lingvo
 * asserts). Pieces come from WpmTokenizer (--wpm_filepath, Lingvo's WpmEncoder) or,
 * beyond Lingvo, SentencePieceTokenizer (--spm_model).
 *
 * Sharding as Lingvo's: the n-th pair (1-based, counted over all file pairs) belongs to
 * shard n % num_shards. With --shard_id=K only shard K is encoded, into
 * --output_filepath itself (Lingvo's behaviour: one process per shard); with the default
 * --shard_id=-1 every shard is written in one pass, to
 * <output_filepath>-%05d-of-%05d (the `name@N` pattern NmtInput's file_pattern takes).
 * --max_len > 0 drops a pair whose source_id or target_id is longer (counting <s>/</s>).
 *
 * Differences from Lingvo: source and target files of unequal length are an error naming
 * both files and the first unmatched line (Lingvo's zip() silently stops at the shorter);
 * the lists of source and target files must have the same length; outputs are written
 * under temporary names and renamed only when everything succeeded (a failed run leaves
 * earlier outputs untouched); features are written in sorted key order.
 *
 * Exit 0 ok; 2 bad flags, vocab/model, input file or line; 1 other failures (I/O). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "base/file.h"
#include "base/flags.h"
#include "base/path.h"
#include "base/status.h"
#include "input/tokenizer.h"
#include "io/example.h"
#include "io/tfrecord.h"
#include "sentencepiece_model.pb-c.h"

static const char *flag_source = "";
static const char *flag_target = "";
static const char *flag_output = "";
static const char *flag_wpm = "";
static const char *flag_spm = "";
static int64_t flag_num_shards = 1;
static int64_t flag_shard_id = -1;
static int64_t flag_max_len = 0;
static double flag_progress_seconds = 10;

static const char *kUsage =
    "Usage: wpm_encode_file --source_filepaths=A.src[,B.src] --target_filepaths=A.tgt[,B.tgt]\n"
    "         (--wpm_filepath=VOCAB | --spm_model=M.model) --output_filepath=OUT\n"
    "         [--num_shards=N] [--shard_id=K] [--max_len=L]\n"
    "Encodes parallel text (line i of a source file pairs with line i of its target file) into\n"
    "TFRecords of MT tf.Examples for NmtInput, as Lingvo's wpm_encode_file.py: source_id = pieces\n"
    "+ </s>, target_id = <s> + pieces, target_label = pieces + </s>, zero paddings, unit weights,\n"
    "source_word / target_word piece strings, natural_order = 1. Pair n (1-based) goes to shard\n"
    "n % num_shards: all shards into OUT-%05d-of-%05d, or with --shard_id=K only shard K into OUT.\n"
    "A progress line (rate, ETA) goes to stderr every --progress_seconds.\n"
    "Exit 0 ok; 2 bad flags, vocab, model or input (the message names the file and line); 1 I/O.";

/* ---- piece strings by id ---- */

typedef struct {
  int n;
  const char **s;
  size_t *len;
  char *data;                         /* WPM: the vocab file, pieces point into it */
  Sentencepiece__ModelProto *model;   /* SPM: pieces point into it */
} piece_table;

static void pieces_free(piece_table *pt) {
  free(pt->s);
  free(pt->len);
  free(pt->data);
  if (pt->model) sentencepiece__model_proto__free_unpacked(pt->model, NULL);
  memset(pt, 0, sizeof *pt);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static bool grow(piece_table *pt, int *cap) {
  if (pt->n < *cap) return true;
  int nc = *cap ? 2 * *cap : 1024;
  const char **s = realloc(pt->s, sizeof *s * (size_t)nc);
  if (s) pt->s = s;
  size_t *l = realloc(pt->len, sizeof *l * (size_t)nc);
  if (l) pt->len = l;
  if (!s || !l) return false;
  *cap = nc;
  return true;
}

/* A Lingvo WPM vocab as WpmTokenizer parses it: line i (0-based) holds piece i, the
 * first TAB field with surrounding whitespace stripped. ids[0..3) get the first line of
 * <unk>, <s>, </s> (-1 if absent). The tokenizer validates the file; this only names
 * the pieces. */
static lv_status load_wpm_pieces(const char *path, piece_table *pt, int32_t ids[3]) {
  size_t len;
  LV_TRY(lv_status_wrap(lv_file_read_all(path, &pt->data, &len), "--wpm_filepath"));
  static const char *const names[3] = {"<unk>", "<s>", "</s>"};
  ids[0] = ids[1] = ids[2] = -1;
  int cap = 0;
  for (size_t pos = 0; pos < len; pt->n++) {
    const char *l = pt->data + pos;
    const char *nl = memchr(l, '\n', len - pos);
    size_t ln = nl ? (size_t)(nl - l) : len - pos;
    pos += ln + 1;
    while (ln && is_space(*l)) l++, ln--;
    while (ln && is_space(l[ln - 1])) ln--;
    const char *tab = memchr(l, '\t', ln);
    if (tab) ln = (size_t)(tab - l);
    if (!grow(pt, &cap)) return lv_status_make(LV_ERR_RESOURCE, "out of memory reading %s", path);
    pt->s[pt->n] = l;
    pt->len[pt->n] = ln;
    for (int k = 0; k < 3; k++)
      if (ids[k] < 0 && ln == strlen(names[k]) && !memcmp(l, names[k], ln)) ids[k] = pt->n;
  }
  return NULL;
}

static lv_status load_spm_pieces(const char *path, piece_table *pt) {
  size_t len;
  char *data;
  LV_TRY(lv_status_wrap(lv_file_read_all(path, &data, &len), "--spm_model"));
  pt->model = sentencepiece__model_proto__unpack(NULL, len, (const uint8_t *)data);
  free(data);
  if (!pt->model)
    return lv_status_make(LV_ERR_CORRUPT, "--spm_model: %s: not a SentencePiece model (%zu bytes do not parse)", path,
                          len);
  int cap = 0;
  for (size_t i = 0; i < pt->model->n_pieces; i++) {
    if (!grow(pt, &cap)) return lv_status_make(LV_ERR_RESOURCE, "out of memory reading %s", path);
    const char *p = pt->model->pieces[i]->piece ? pt->model->pieces[i]->piece : "";
    pt->s[pt->n] = p;
    pt->len[pt->n++] = strlen(p);
  }
  return NULL;
}

/* ---- the tokenizer ---- */

typedef struct {
  lv_params *p;
  lv_tokenizer *t;
  piece_table pieces;
  int32_t sos, eos, unk;
} encoder;

static void encoder_free(encoder *e) {
  lv_tokenizer_destroy(e->t);
  lv_params_free(e->p);
  pieces_free(&e->pieces);
}

static lv_status encoder_create(encoder *e) {
  if (!*flag_wpm == !*flag_spm)
    return lv_status_make(LV_ERR_INVALID, "give exactly one of --wpm_filepath (a Lingvo WPM vocab) and --spm_model");
  lv_tokenizer_register_all();
  bool wpm = *flag_wpm;
  LV_TRY(lv_registry_instantiate(wpm ? "WpmTokenizer" : "SentencePieceTokenizer", &e->p));
  if (wpm) {
    int32_t ids[3];
    LV_TRY(load_wpm_pieces(flag_wpm, &e->pieces, ids));
    /* Lingvo's encoder takes <s>/</s> wherever the vocab has them. */
    static const char *const keys[3] = {"target_unk_id", "target_sos_id", "target_eos_id"};
    for (int k = 0; k < 3; k++)
      if (ids[k] >= 0) LV_TRY(lv_params_set_int(e->p, keys[k], ids[k]));
    LV_TRY(lv_params_set_string(e->p, "vocab_filepath", flag_wpm));
  } else {
    LV_TRY(load_spm_pieces(flag_spm, &e->pieces));
    const Sentencepiece__TrainerSpec *ts = e->pieces.model->trainer_spec;
    int32_t bos = ts && ts->has_bos_id ? ts->bos_id : 1, unk = ts && ts->has_unk_id ? ts->unk_id : 0;
    if (bos < 0 || bos >= e->pieces.n)
      return lv_status_make(LV_ERR_INVALID,
                            "--spm_model: %s has no <s> piece (trainer_spec.bos_id = %d); train it with --bos_id >= 0",
                            flag_spm, (int)bos);
    LV_TRY(lv_params_set_int(e->p, "target_sos_id", bos));
    if (unk >= 0) LV_TRY(lv_params_set_int(e->p, "target_unk_id", unk));
    LV_TRY(lv_params_set_string(e->p, "spm_model", flag_spm));
    LV_TRY(lv_params_set_bool(e->p, "append_eos", false));
  }
  lv_params_freeze(e->p);
  LV_TRY(lv_status_wrap(lv_tokenizer_create(e->p, &e->t), "%s", wpm ? "--wpm_filepath" : "--spm_model"));
  e->sos = e->t->sos_id;
  e->eos = e->t->eos_id;
  e->unk = e->t->unk_id;
  if (!wpm && e->eos == e->unk)
    return lv_status_make(LV_ERR_INVALID, "--spm_model: %s has no </s> piece; train it with --eos_id >= 0", flag_spm);
  return NULL;
}

/* ---- one pair -> one tf.Example ---- */

/* Lingvo's _Preprocess and _AssertTextFormat on s[0..*n) (modified in place). */
static lv_status preprocess(char *s, size_t *n, const char *path, long lineno) {
  size_t a = 0, e = *n;
  while (a < e && is_space(s[a])) a++;
  while (e > a && is_space(s[e - 1])) e--;
  size_t w = 0;
  for (size_t r = a; r < e;) {
    if (r + 5 <= e && !memcmp(s + r, " </s>", 5)) {
      r += 5;
      continue;
    }
    s[w++] = s[r++];
  }
  *n = w;
  if ((w >= 3 && (!memcmp(s, "<s>", 3) || !memcmp(s, "<S>", 3))) ||
      (w >= 4 && (!memcmp(s + w - 4, "</s>", 4) || !memcmp(s + w - 4, "</S>", 4))))
    return lv_status_make(LV_ERR_INVALID,
                          "%s:%ld: a line must not start with <s> or end with </s> (wpm_encode_file adds them)", path,
                          lineno);
  return NULL;
}

typedef struct {
  int64_t *ids;
  float *zeros, *ones;
  const char **words;
  size_t *lens;
  int cap;
} scratch;

static lv_status scratch_reserve(scratch *b, int n) {
  if (n <= b->cap) return NULL;
  int nc = n < 64 ? 64 : 2 * n;
  free(b->ids), free(b->zeros), free(b->ones), free(b->words), free(b->lens);
  b->ids = malloc(sizeof *b->ids * (size_t)nc);
  b->zeros = calloc((size_t)nc, sizeof *b->zeros);
  b->ones = malloc(sizeof *b->ones * (size_t)nc);
  b->words = malloc(sizeof *b->words * (size_t)nc);
  b->lens = malloc(sizeof *b->lens * (size_t)nc);
  if (!b->ids || !b->zeros || !b->ones || !b->words || !b->lens) {
    b->cap = 0;
    return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  }
  for (int i = 0; i < nc; i++) b->ones[i] = 1.f;
  b->cap = nc;
  return NULL;
}

static void scratch_free(scratch *b) {
  free(b->ids), free(b->zeros), free(b->ones), free(b->words), free(b->lens);
}

static void piece_str(const encoder *enc, int32_t id, const char **s, size_t *n) {
  if (id == enc->sos) *s = "<s>", *n = 3;
  else if (id == enc->eos) *s = "</s>", *n = 4;
  else if (id >= 0 && id < enc->pieces.n) *s = enc->pieces.s[id], *n = enc->pieces.len[id];
  else *s = "<unk>", *n = 5;
}

/* Adds `id_key` (ids with `pre` before and `post` after, -1: none), `pad_key` (zeros
 * or, with ones, ones) and, when word_key, the piece strings. */
static lv_status add_seq(lv_example *ex, scratch *b, const encoder *enc, const lv_tok_ids *t, int32_t pre,
                         int32_t post, const char *id_key, const char *word_key) {
  int n = t->n + (pre >= 0) + (post >= 0), k = 0;
  LV_TRY(scratch_reserve(b, n));
  if (pre >= 0) b->ids[k++] = pre;
  for (int i = 0; i < t->n; i++) b->ids[k++] = t->v[i];
  if (post >= 0) b->ids[k++] = post;
  lv_example_add_int64s(ex, id_key, n, b->ids);
  if (word_key) {
    for (int i = 0; i < n; i++) piece_str(enc, (int32_t)b->ids[i], &b->words[i], &b->lens[i]);
    lv_example_add_bytes(ex, word_key, n, b->words, b->lens);
  }
  return NULL;
}

/* ---- outputs ---- */

typedef struct {
  int n;
  char **final, **tmp;
  lv_tfrecord_writer **w;
  int64_t *records;
} outputs;

/* inputs[0..ninputs): the files read (name pairs: flag, path); an output that is one of
 * them is refused before anything is written, as the rename would replace it. */
static lv_status outputs_open(outputs *o, const char *const (*inputs)[2], int ninputs) {
  o->n = flag_shard_id >= 0 ? 1 : (int)flag_num_shards;
  o->final = calloc((size_t)o->n, sizeof *o->final);
  o->tmp = calloc((size_t)o->n, sizeof *o->tmp);
  o->w = calloc((size_t)o->n, sizeof *o->w);
  o->records = calloc((size_t)o->n, sizeof *o->records);
  if (!o->final || !o->tmp || !o->w || !o->records) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  for (int i = 0; i < o->n; i++) {
    size_t len = strlen(flag_output) + 64;
    o->final[i] = malloc(len);
    o->tmp[i] = malloc(len);
    if (!o->final[i] || !o->tmp[i]) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
    if (flag_shard_id >= 0) snprintf(o->final[i], len, "%s", flag_output);
    else snprintf(o->final[i], len, "%s-%05d-of-%05d", flag_output, i, (int)flag_num_shards);
    snprintf(o->tmp[i], len, "%s.tmp-%ld", o->final[i], (long)getpid());
    for (int k = 0; k < ninputs; k++)
      if (*inputs[k][1] && lv_file_same(o->final[i], inputs[k][1]))
        return lv_status_make(LV_ERR_INVALID, "--output_filepath: %s is the %s file %s; it would be overwritten",
                              o->final[i], inputs[k][0], inputs[k][1]);
  }
  for (int i = 0; i < o->n; i++) {
    LV_TRY(lv_status_wrap(lv_tfrecord_writer_open(o->tmp[i], false, &o->w[i]), "--output_filepath"));
  }
  return NULL;
}

/* Closes every writer; on success renames the temporary files to their final names,
 * otherwise removes them. */
static lv_status outputs_close(outputs *o, bool ok) {
  lv_status s = NULL;
  for (int i = 0; i < o->n; i++) {
    if (o->w && o->w[i]) {
      lv_status c = lv_tfrecord_writer_close(o->w[i]);
      if (!s) s = c;
      else lv_status_free(c);
    }
  }
  for (int i = 0; i < o->n; i++) {
    if (!o->tmp || !o->tmp[i]) continue;
    if (ok && !s) {
      if (rename(o->tmp[i], o->final[i]))
        s = lv_status_make(LV_ERR_IO, "--output_filepath: cannot rename %s to %s", o->tmp[i], o->final[i]);
    } else {
      unlink(o->tmp[i]);
    }
  }
  if (ok && !s && o->n > 0) s = lv_file_sync_parent_dir(o->final[0]);
  for (int i = 0; i < o->n; i++) {
    if (o->final) free(o->final[i]);
    if (o->tmp) free(o->tmp[i]);
  }
  free(o->final), free(o->tmp), free(o->w), free(o->records);
  return s;
}

/* ---- progress ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_dur(double s, char *buf, size_t n) {
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

typedef struct {
  double start, last;
  int64_t total_bytes, done_bytes, pairs;
} progress;

static void progress_maybe(progress *pr, bool force) {
  double t = now_s();
  if (!force && (flag_progress_seconds <= 0 || t - pr->last < flag_progress_seconds)) return;
  pr->last = t;
  double el = t - pr->start, rate = el > 0 ? (double)pr->pairs / el : 0;
  double frac = pr->total_bytes > 0 ? (double)pr->done_bytes / (double)pr->total_bytes : 0;
  char eta[32] = "?", elb[32];
  if (frac > 0) fmt_dur(el * (1 - frac) / frac, eta, sizeof eta);
  fmt_dur(el, elb, sizeof elb);
  fprintf(stderr, "wpm_encode_file: %lld pairs, %.1f%% of the source bytes, %.0f pairs/s, elapsed %s, ETA %s\n",
          (long long)pr->pairs, 100 * frac, rate, elb, eta);
}

/* ---- the run ---- */

typedef struct {
  char **v;
  int n;
  char *buf;
} str_list;

static lv_status split_commas(const char *flag, const char *s, str_list *out) {
  out->buf = strdup(s);
  if (!out->buf) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  int n = 1;
  for (const char *c = s; *c; c++) n += *c == ',';
  out->v = calloc((size_t)n, sizeof *out->v);
  if (!out->v) return lv_status_make(LV_ERR_RESOURCE, "out of memory");
  char *save = NULL;
  for (char *tok = strtok_r(out->buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) out->v[out->n++] = tok;
  if (out->n == 0) return lv_status_make(LV_ERR_INVALID, "--%s: expected a comma-separated list of files", flag);
  return NULL;
}

typedef struct {
  int64_t pairs, written, dropped, unk_pieces, pieces;
} counts;

static lv_status encode_pair_files(const char *sp, const char *tp, encoder *enc, outputs *o, progress *pr,
                                   counts *c) {
  FILE *fs, *ft;
  LV_TRY(lv_file_fopen_regular(sp, "--source_filepaths", &fs));
  lv_status so = lv_file_fopen_regular(tp, "--target_filepaths", &ft);
  if (so) {
    fclose(fs);
    return so;
  }
  char *ls = NULL, *lt = NULL;
  size_t cs = 0, ct = 0;
  lv_tok_ids si = {0}, ti = {0};
  scratch b = {0};
  lv_status s = NULL;
  for (long lineno = 1; !s; lineno++) {
    errno = 0;
    ssize_t ns = getline(&ls, &cs, fs), nt = getline(&lt, &ct, ft);
    /* A failed getline that is not the end of its file (ENOMEM on a line past the memory
     * limit sets neither flag) is an error, not a shorter corpus. */
    if ((ns < 0 && !feof(fs)) || (nt < 0 && !feof(ft))) {
      s = lv_status_make(errno == ENOMEM ? LV_ERR_RESOURCE : LV_ERR_IO, "%s: cannot read line %ld: %s",
                         ns < 0 && !feof(fs) ? sp : tp, lineno, strerror(errno ? errno : EIO));
      break;
    }
    if (ns < 0 && nt < 0) break;
    if (ns < 0 || nt < 0) {
      const char *shorter = ns < 0 ? sp : tp, *longer = ns < 0 ? tp : sp;
      s = lv_status_make(LV_ERR_INVALID,
                         "line counts differ: %s ends after %ld lines but %s has line %ld; source and target files "
                         "must be aligned line by line",
                         shorter, lineno - 1, longer, lineno);
      break;
    }
    pr->done_bytes += ns;
    c->pairs++;
    pr->pairs = c->pairs;
    if ((c->pairs & 63) == 0) progress_maybe(pr, false);
    int shard = (int)(c->pairs % flag_num_shards);
    if (flag_shard_id >= 0 && shard != flag_shard_id) continue;
    size_t n1 = (size_t)ns, n2 = (size_t)nt;
    if ((s = preprocess(ls, &n1, sp, lineno)) || (s = preprocess(lt, &n2, tp, lineno))) break;
    si.n = ti.n = 0;
    if ((s = lv_status_wrap(lv_tokenizer_encode(enc->t, ls, n1, &si), "%s:%ld", sp, lineno))) break;
    if ((s = lv_status_wrap(lv_tokenizer_encode(enc->t, lt, n2, &ti), "%s:%ld", tp, lineno))) break;
    if (flag_max_len > 0 && (si.n + 1 > flag_max_len || ti.n + 1 > flag_max_len)) {
      c->dropped++;
      continue;
    }
    for (int i = 0; i < si.n; i++) c->unk_pieces += si.v[i] == enc->unk;
    for (int i = 0; i < ti.n; i++) c->unk_pieces += ti.v[i] == enc->unk;
    c->pieces += si.n + ti.n;
    lv_example *ex = lv_example_new();
    int64_t one = 1;
    lv_example_add_int64s(ex, "natural_order", 1, &one);
    s = add_seq(ex, &b, enc, &si, -1, enc->eos, "source_id", "source_word");
    if (!s) s = scratch_reserve(&b, (si.n > ti.n ? si.n : ti.n) + 1);
    if (!s) lv_example_add_floats(ex, "source_padding", si.n + 1, b.zeros);
    if (!s) s = add_seq(ex, &b, enc, &ti, enc->sos, -1, "target_id", "target_word");
    if (!s) s = add_seq(ex, &b, enc, &ti, -1, enc->eos, "target_label", NULL);
    if (!s) s = scratch_reserve(&b, ti.n + 1);
    if (!s) {
      lv_example_add_floats(ex, "target_padding", ti.n + 1, b.zeros);
      lv_example_add_floats(ex, "target_weight", ti.n + 1, b.ones);
    }
    uint8_t *data = NULL;
    size_t len = 0;
    if (!s) s = lv_example_serialize(ex, &data, &len);
    lv_example_free(ex);
    int slot = flag_shard_id >= 0 ? 0 : shard;
    if (!s) s = lv_tfrecord_writer_write(o->w[slot], data, len);
    free(data);
    if (!s) {
      o->records[slot]++;
      c->written++;
    }
  }
  if (!s && ferror(fs)) s = lv_status_make(LV_ERR_IO, "%s: read error", sp);
  if (!s && ferror(ft)) s = lv_status_make(LV_ERR_IO, "%s: read error", tp);
  fclose(fs);
  fclose(ft);
  free(ls);
  free(lt);
  lv_tok_ids_free(&si);
  lv_tok_ids_free(&ti);
  scratch_free(&b);
  return s;
}

static lv_status check_flags(void) {
  if (!*flag_source) return lv_status_make(LV_ERR_INVALID, "--source_filepaths is required");
  if (!*flag_target) return lv_status_make(LV_ERR_INVALID, "--target_filepaths is required");
  if (!*flag_output) return lv_status_make(LV_ERR_INVALID, "--output_filepath is required");
  if (flag_num_shards < 1 || flag_num_shards > 99999)
    return lv_status_make(LV_ERR_INVALID, "--num_shards must be in 1..99999, got %lld", (long long)flag_num_shards);
  if (flag_shard_id < -1 || flag_shard_id >= flag_num_shards)
    return lv_status_make(LV_ERR_INVALID, "--shard_id must be -1 (all shards) or in 0..%lld, got %lld",
                          (long long)flag_num_shards - 1, (long long)flag_shard_id);
  if (flag_max_len < 0) return lv_status_make(LV_ERR_INVALID, "--max_len must be >= 0, got %lld", (long long)flag_max_len);
  char dir[LV_PATH_MAX];
  LV_TRY(lv_status_wrap(lv_path_fmt(dir, sizeof dir, "%s", flag_output), "--output_filepath"));
  char *slash = strrchr(dir, '/');
  if (slash) {
    if (slash == dir) slash[1] = 0;
    else *slash = 0;
    if (!lv_file_is_dir(dir))
      return lv_status_make(LV_ERR_NOT_FOUND, "--output_filepath=%s: directory %s does not exist", flag_output, dir);
  }
  return NULL;
}

static lv_status run(void) {
  LV_TRY(check_flags());
  str_list src = {0}, tgt = {0};
  encoder enc = {0};
  outputs out = {0};
  counts c = {0};
  progress pr = {.start = now_s()};
  pr.last = pr.start;
  lv_status s = split_commas("source_filepaths", flag_source, &src);
  if (!s) s = split_commas("target_filepaths", flag_target, &tgt);
  if (!s && src.n != tgt.n)
    s = lv_status_make(LV_ERR_INVALID, "--source_filepaths has %d files but --target_filepaths has %d", src.n, tgt.n);
  for (int i = 0; !s && i < src.n; i++) {
    int64_t sz = lv_file_size(src.v[i]);
    if (sz < 0) s = lv_status_make(LV_ERR_NOT_FOUND, "--source_filepaths: %s: cannot open", src.v[i]);
    else pr.total_bytes += sz;
    if (!s && lv_file_size(tgt.v[i]) < 0)
      s = lv_status_make(LV_ERR_NOT_FOUND, "--target_filepaths: %s: cannot open", tgt.v[i]);
  }
  if (!s) s = encoder_create(&enc);
  const char *(*inputs)[2] = NULL;
  int ninputs = 0;
  if (!s && !(inputs = calloc((size_t)(src.n + tgt.n + 2), sizeof *inputs)))
    s = lv_status_make(LV_ERR_RESOURCE, "out of memory");
  if (!s) {
    inputs[ninputs][0] = "--wpm_filepath", inputs[ninputs++][1] = flag_wpm;
    inputs[ninputs][0] = "--spm_model", inputs[ninputs++][1] = flag_spm;
    for (int i = 0; i < src.n; i++) inputs[ninputs][0] = "--source_filepaths", inputs[ninputs++][1] = src.v[i];
    for (int i = 0; i < tgt.n; i++) inputs[ninputs][0] = "--target_filepaths", inputs[ninputs++][1] = tgt.v[i];
    s = outputs_open(&out, (const char *const(*)[2])inputs, ninputs);
  }
  free(inputs);
  for (int i = 0; !s && i < src.n; i++) s = encode_pair_files(src.v[i], tgt.v[i], &enc, &out, &pr, &c);
  int nout = out.n;
  lv_status cs = outputs_close(&out, !s);
  if (!s) s = cs;
  else lv_status_free(cs);
  if (!s) {
    double el = now_s() - pr.start;
    fprintf(stderr,
            "wpm_encode_file: %lld pairs read, %lld records written to %s%s%.0d (%d file%s; %lld dropped by --max_len), "
            "%.2f pieces per sentence, %lld <unk> pieces, %.1f s\n",
            (long long)c.pairs, (long long)c.written, flag_output,
            flag_shard_id >= 0 ? "" : "@", flag_shard_id >= 0 ? 0 : nout, nout, nout == 1 ? "" : "s", (long long)c.dropped,
            c.written ? (double)c.pieces / (2.0 * (double)c.written) : 0.0, (long long)c.unk_pieces, el);
  }
  encoder_free(&enc);
  free(src.v), free(src.buf), free(tgt.v), free(tgt.buf);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  lv_flag flags[] = {
      LV_FLAG_STR("source_filepaths", &flag_source, "Comma-separated list of source files. Must align with target."),
      LV_FLAG_STR("target_filepaths", &flag_target, "Comma-separated list of target files."),
      LV_FLAG_STR("output_filepath", &flag_output,
                  "File of tfrecords (with --shard_id=-1: the prefix of OUT-%05d-of-%05d)."),
      LV_FLAG_STR("wpm_filepath", &flag_wpm, "The wordpiece vocabulary file (Lingvo's WPM format)."),
      LV_FLAG_STR("spm_model", &flag_spm, "lingvoc: a SentencePiece .model to encode with instead of --wpm_filepath."),
      LV_FLAG_I64("num_shards", &flag_num_shards, "Total number of shards."),
      LV_FLAG_I64("shard_id", &flag_shard_id,
                  "This shard id (0-based): only its pairs are encoded, into --output_filepath. -1: every shard."),
      LV_FLAG_I64("max_len", &flag_max_len,
                  "Drop sentence if src/tgt tokens exceed max length, counting <s> and </s>. Only use during "
                  "training. A value of 0 does not filter."),
      LV_FLAG_F64("progress_seconds", &flag_progress_seconds,
                  "lingvoc: seconds between progress lines on stderr (0: none)."),
  };
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report("wpm_encode_file", s);
  return lv_status_report("wpm_encode_file", run());
}
