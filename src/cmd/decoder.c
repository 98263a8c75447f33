/* bin/decoder: Lingvo's decoder_<dataset> job for any task that decodes (the task's decoder
 * hooks, models/task.h), and --decode_text to decode raw text lines through the task. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "base/log.h"
#include "lingvoc.h"
#include "runners/cli.h"
#include "runners/decoder.h"
#include "runners/model_export.h"

static const char kUsage[] =
    "usage: decoder --model=mt.bible_en_es.TransformerSmall --logdir=DIR [--dataset=Test] [--once] [flags]\n"
    "       decoder --model=... --logdir=DIR --decode_text=FILE|- [--checkpoint=PREFIX]\n"
    "       decoder --model=asr.bible_tts.LasSmall --logdir=DIR --decode_audio=FILE|-|@LIST [--checkpoint=PREFIX]\n"
    "       decoder --model=lm.bible.RnnLmSmall --logdir=DIR --score_text=FILE|-\n"
    "       decoder --model=lm.bible.RnnLmSmall --logdir=DIR --sample=N [--prefix=TEXT] [--temperature=T]\n"
    "               [--top_k=K] [--seed=S]\n"
    "       decoder --model=image.mnist.LeNet5 --logdir=DIR --decode_images=LIST|-\n"
    "       decoder --model_file=FILE --decode_text=...|--decode_audio=...|--score_text=...|--sample=N|--decode_images=...\n"
    "\n"
    "Decodes the dataset with beam search (task.decoder.beam_search, target_seq_len) for each\n"
    "checkpoint a trainer writes to DIR/train (polling with backoff 1 s x1.5 up to\n"
    "--max_poll_secs) and writes DIR/decoder_<dataset>/decoder_out_%09d (source, reference and\n"
    "top hyps per sentence), score-%08d.txt (corpus_bleu, sacrebleu, ...), events and\n"
    "processed_ckpts.txt; stops after the checkpoint at train.max_steps. --once decodes the\n"
    "latest checkpoint (or --checkpoint=PREFIX) and exits. Text needs input.tokenizer.\n"
    "\n"
    "--decode_text translates the lines of FILE (- = stdin) to stdout, one line per line, through the\n"
    "library (lv_translate; a NUL byte ends a line's text, with a message):\n"
    "empty or invalid-UTF-8 lines give empty lines (the latter with a message on stderr);\n"
    "lines over input.source_max_length pieces are truncated to it (with a message).\n"
    "\n"
    "--decode_audio transcribes an audio file (WAV, FLAC, OGG; any rate, mono or stereo), or\n"
    "each file named by a line of LIST (@LIST; - = the lines of stdin), one `path<TAB>text` line\n"
    "each, in order, and logs the real-time factor. A file that cannot be read (or whose\n"
    "log-mels are not finite: float samples far over 1.0), or a line with a NUL byte, tab or\n"
    "newline (refused), gives an error naming the list, line and file, and an empty line; the\n"
    "others are still transcribed, and the exit status is 2.\n"
    "Files are transcribed --decode_batch_size (8; cut to what the 2 GiB decode budget holds\n"
    "for files of input.source_max_length frames) at a time, padded to the longest of the\n"
    "batch (lines come out batch by batch; as in Lingvo, strided SAME convolutions align a\n"
    "file's frames by the padded length, so a weak model may read a file differently in\n"
    "another batch). Silence\n"
    "(no sample above -60 dBFS) gives `path<TAB>` with no text.\n"
    "\n"
    "A language model: --score_text writes per line log-probability, tokens (incl. </s>) and\n"
    "perplexity, tab-separated, then `corpus: N lines, T tokens, log_pplx X, perplexity Y`;\n"
    "--sample writes N continuations of --prefix (task.decoder.sample_temperature, sample_top_k,\n"
    "sample_seed: sample i draws from stream i of the seed, so a seed repeats its samples).\n"
    "\n"
    "--decode_images=LIST classifies the PNG files LIST names (one a line; - = stdin) with an image\n"
    "classifier (the experiment's input.data_shape, gray or RGB), one `path<TAB>class<TAB>probability`\n"
    "line each, --decode_batch_size at a time, through the library (lv_classify_files).\n"
    "\n"
    "--model_file=FILE (bin/export's) takes the place of --model, --logdir and --checkpoint for\n"
    "the five flags above: params, tokenizer and weights come from the file.\n";

/* --model_file's params: the file's, its assets in a private directory, the overrides. */
static lv_status model_file_params(const lv_cli *c, const char *path, lv_model_file **mf, char *assets, size_t n,
                                   lv_params **p) {
  LV_TRY(lv_model_file_read(path, mf));
  LV_TRY(lv_model_file_assets_dir(*mf, assets, n));
  return lv_model_file_params(*mf, assets, c->model_params_override, c->model_params_file_override, c->flag_params,
                              c->num_threads, p);
}

/* The library's log lines on bin/decoder's stderr, as its own (the global level filters). */
static void api_log(void *user, int level, const char *message) {
  (void)user;
  lv_log_sink prev = lv_log_thread_sink_set((lv_log_sink){0});
  lv_log_thread_sink_restore((lv_log_sink){.active = false}); /* this thread: stderr, as outside the library */
  lv_log((lv_log_level)level, "%s", message);
  lv_log_thread_sink_restore(prev);
}

/* The model through the library, from the flags: --model_file, or the experiment. */
static lv_status api_load(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                          const lv_decode_options *d, lv_model **m) {
  lv_load_options o;
  lv_load_options_init(&o);
  if (d) o.decode = *d;
  o.params_override = c->model_params_override;
  o.params_file_override = c->model_params_file_override;
  o.num_threads = (int)c->num_threads;
  o.gpu = !strcmp(c->run_locally, "gpu"); /* lv_cli_build_params checked it and the build's CUDA */
  o.log = api_log;
  o.log_level = LV_LOG_DEBUG;
  if (*model_file) return lv_model_load_file(model_file, &o, m);
  o.model = c->model, o.logdir = c->logdir, o.checkpoint = checkpoint, o.experiments_dir = c->experiments_dir;
  o.dataset = dataset;
  return lv_model_load(&o, m);
}

/* A line flag's input (path: FILE or - for stdin; NULL: none) and the model. */
static lv_status client_open(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                             const lv_decode_options *d, const char *kind, const char *path, FILE **in, lv_model **m) {
  if (path) LV_TRY(lv_decoder_open_input(kind, path, in));
  return api_load(c, model_file, checkpoint, dataset, d, m);
}

/* Frees what a line flag's client held; returns s. */
static lv_status client_close(lv_status s, char *line, FILE *in, lv_model *m) {
  free(line);
  if (in && in != stdin) fclose(in);
  lv_model_free(m);
  return s;
}

/* --decode_text through the library: each line of path (- = stdin) to its best
 * translation (lv_translate), one output line each, flushed per line. */
static lv_status translate_lines(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                                 const char *path) {
  FILE *in = NULL;
  lv_model *m = NULL;
  lv_nbest *r = NULL;
  lv_status s = client_open(c, model_file, checkpoint, dataset, NULL, "decode_text", path, &in, &m);
  if (!s) s = lv_status_wrap(lv_translate(m, NULL, NULL, 0, 1, &r), "--decode_text"); /* the kind, before any input */
  lv_nbest_free(r);
  const char *name = strcmp(path, "-") ? path : "stdin";
  char *line = NULL;
  size_t cap = 0;
  for (int64_t lineno = 1; !s; lineno++) {
    ssize_t len = 0;
    bool cut = false;
    s = lv_decoder_read_line(in, name, &line, &cap, &len, &cut);
    if (s || len < 0) break;
    if (cut)
      lv_warn("decode_text: line %lld: longer than %zu bytes: only its first %zu are decoded", (long long)lineno,
              LV_DECODER_MAX_LINE_BYTES, LV_DECODER_MAX_LINE_BYTES);
    const char *nul = memchr(line, 0, (size_t)len);
    if (nul)
      lv_warn("decode_text: line %lld: a NUL byte at byte %zu: only the text before it is translated (the library "
              "takes C strings)", (long long)lineno, (size_t)(nul - line));
    const char *src[1] = {line};
    r = NULL;
    s = lv_translate(m, NULL, src, 1, 1, &r);
    if (s) s = lv_status_wrap(s, "--decode_text=%s line %lld", path, (long long)lineno);
    if (!s) s = lv_decoder_write_line("decode_text", stdout, r->n[0] ? r->text[0][0] : "", lineno);
    lv_nbest_free(r);
  }
  return client_close(s, line, in, m);
}

/* --score_text through the library: per line of path (- = stdin) its log-probability,
 * tokens and perplexity (lv_score_text), then the corpus line. */
static lv_status score_lines(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                             const char *path) {
  FILE *in = NULL;
  lv_model *m = NULL;
  lv_scores *r = NULL;
  lv_status s = client_open(c, model_file, checkpoint, dataset, NULL, "score_text", path, &in, &m);
  if (!s) s = lv_status_wrap(lv_score_text(m, NULL, NULL, 0, &r), "--score_text"); /* the kind, before any input */
  lv_scores_free(r);
  const char *name = strcmp(path, "-") ? path : "stdin";
  char *line = NULL;
  size_t cap = 0;
  int64_t lineno = 0, lines = 0;
  double tokens = 0, log_prob = 0;
  for (ssize_t len = 0; !s;) {
    bool cut = false;
    s = lv_decoder_read_line(in, name, &line, &cap, &len, &cut);
    if (s || len < 0) break;
    lineno++;
    if (cut)
      lv_warn("score_text: line %lld: longer than %zu bytes: only its first %zu are decoded", (long long)lineno,
              LV_DECODER_MAX_LINE_BYTES, LV_DECODER_MAX_LINE_BYTES);
    const char *nul = memchr(line, 0, (size_t)len);
    const char *src[1] = {nul ? "" : line};
    if (nul)
      lv_warn("score_text: line %lld: a NUL byte at byte %zu: not scored (empty output line)", (long long)lineno,
              (size_t)(nul - line));
    /* A line with a NUL byte still counts in the session (it numbers the library's messages). */
    r = NULL;
    s = lv_score_text(m, NULL, src, 1, &r);
    if (s) s = lv_status_wrap(s, "--score_text=%s line %lld", path, (long long)lineno);
    char *text = NULL;
    if (!s && !nul && r->n_tokens[0] > 0) {
      const double lp = r->logprob[0], n = r->n_tokens[0];
      lines++;
      tokens += n;
      log_prob += lp;
      LV_ASSERT(asprintf(&text, "%.6f\t%.0f\t%.6g", lp, n, exp(-lp / fmax(n, 1.0))) >= 0);
    }
    if (!s) s = lv_decoder_write_line("score_text", stdout, text ? text : "", lineno);
    free(text);
    lv_scores_free(r);
  }
  if (!s) {
    /* No token scored (an empty input): no perplexity, where 1 would read as a perfect model. */
    const double lp = tokens > 0 ? -log_prob / tokens : NAN;
    if (!(tokens > 0)) lv_warn("score_text: no token was scored: log_pplx and perplexity are nan");
    char *text = NULL;
    LV_ASSERT(asprintf(&text, "corpus: %lld lines, %.0f tokens, log_pplx %.6f, perplexity %.6g", (long long)lines,
                       tokens, lp, exp(lp)) >= 0);
    s = lv_decoder_write_line("score_text", stdout, text, lineno + 1);
    free(text);
  }
  return client_close(s, line, in, m);
}

/* --sample through the library: n continuations of prefix, one a line as each is drawn
 * (sample i from the seed's stream i, lv_sample_text_from). */
static lv_status sample_lines(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                              const lv_decode_options *d, const char *prefix, int64_t n) {
  lv_model *m = NULL;
  lv_status s = api_load(c, model_file, checkpoint, dataset, d, &m);
  for (int64_t i = 0; !s && i < n; i++) {
    lv_texts *r = NULL;
    s = lv_sample_text_from(m, NULL, prefix, i, 1, &r);
    if (s) s = lv_status_wrap(s, "--sample: sample %lld", (long long)i + 1);
    if (!s) s = lv_decoder_write_line("sample", stdout, r->text[0], i + 1);
    lv_texts_free(r);
  }
  lv_model_free(m);
  return s;
}

/* --decode_audio's lines waiting for their batch: the paths (NULL: an empty line or one
 * with a NUL byte, which has no file to read) and the first's line number. */
typedef struct audio_lines {
  char **line;
  bool *nul;
  int n;
  int64_t first;
  int64_t files, failed;
  double secs;
} audio_lines;

/* The pending lines through lv_transcribe_files (the files among them), then their
 * `path<TAB>text` lines in order; an unreadable file is logged with its line and gives
 * an empty line. */
static lv_status transcribe_pending(lv_model *m, const char *input, audio_lines *al) {
  const char **paths = calloc((size_t)al->n + 1, sizeof *paths);
  LV_ASSERT(paths);
  int np = 0;
  for (int i = 0; i < al->n; i++)
    if (*al->line[i] && !al->nul[i]) paths[np++] = al->line[i];
  lv_nbest *r = NULL;
  lv_status s = np ? lv_transcribe_files(m, NULL, paths, np, 1, &r) : NULL;
  if (s)
    s = lv_status_wrap(s, "--decode_audio=%s lines %lld-%lld", input, (long long)al->first,
                       (long long)(al->first + al->n - 1));
  for (int i = 0, k = 0; !s && i < al->n; i++) {
    const int64_t lineno = al->first + i;
    char *text = NULL;
    if (al->nul[i]) {
      lv_error("--decode_audio=%s line %lld: a NUL byte at column %zu of the path (expected a path without NUL bytes, "
               "tabs or newlines): not transcribed (empty output line)", input, (long long)lineno,
               strlen(al->line[i]) + 1);
      al->failed++;
    } else if (*al->line[i]) {
      al->secs += r->seconds[k];
      if (r->error[k]) {
        lv_error("--decode_audio=%s line %lld: %s: not transcribed (empty output line)", input, (long long)lineno,
                 r->error[k]);
        al->failed++;
      } else {
        LV_ASSERT(asprintf(&text, "%s\t%s", al->line[i], r->n[k] ? r->text[k][0] : "") >= 0);
      }
      k++;
    }
    s = lv_decoder_write_line("decode_audio", stdout, text ? text : "", lineno);
    free(text);
  }
  lv_nbest_free(r);
  free(paths);
  for (int i = 0; i < al->n; i++) free(al->line[i]);
  al->files += al->n;
  al->first += al->n;
  al->n = 0;
  return s;
}

/* --decode_audio=FILE|@LIST|- through the library: batch lines at a time (empty lines
 * and unreadable files take their place in a batch, as they always did), then the
 * real-time factor; files that could not be read fail the run after every line. */
static lv_status transcribe_list(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                                 const char *arg, int batch) {
  /* FILE is a one-line input; @LIST and - are files of paths. */
  const bool one = arg[0] != '@' && strcmp(arg, "-");
  const char *input = arg[0] == '@' ? arg + 1 : arg;
  FILE *in = NULL;
  lv_decode_options d;
  lv_decode_options_init(&d);
  d.keep_going = 1;
  d.batch_size = batch; /* at least the batches below, which are cut to the limit */
  lv_model *m = NULL;
  lv_nbest *r = NULL;
  lv_status s = client_open(c, model_file, checkpoint, dataset, &d, "decode_audio", one ? NULL : input, &in, &m);
  if (!s) s = lv_status_wrap(lv_transcribe_files(m, NULL, NULL, 0, 1, &r), "--decode_audio"); /* the kind */
  lv_nbest_free(r);
  const int lim = s ? 0 : lv_transcribe_batch_limit(m);
  if (lim > 0 && batch > lim) {
    lv_info("decode_audio: --decode_batch_size=%d: at most %d lines a batch, what the decoder's memory budget holds",
            batch, lim);
    batch = lim;
  }
  const double t0 = lv_now_monotonic();
  audio_lines al = {.line = calloc((size_t)batch, sizeof(char *)), .nul = calloc((size_t)batch, sizeof(bool)),
                    .first = 1};
  LV_ASSERT(al.line && al.nul);
  const char *name = one ? arg : strcmp(input, "-") ? input : "stdin";
  char *line = NULL;
  size_t cap = 0;
  for (ssize_t len = 0; !s;) {
    bool cut = false;
    if (one) {
      if (al.files + al.n) break;
      line = strdup(arg);
      LV_ASSERT(line);
      len = (ssize_t)strlen(line);
    } else {
      s = lv_decoder_read_line(in, name, &line, &cap, &len, &cut);
      if (s || len < 0) break;
    }
    if (cut)
      lv_warn("decode_audio: line %lld: longer than %zu bytes: only its first %zu are decoded",
              (long long)(al.first + al.n), LV_DECODER_MAX_LINE_BYTES, LV_DECODER_MAX_LINE_BYTES);
    al.nul[al.n] = memchr(line, 0, (size_t)len) != NULL;
    al.line[al.n] = strdup(line);
    LV_ASSERT(al.line[al.n]);
    if (++al.n == batch) s = transcribe_pending(m, input, &al);
  }
  if (!s && al.n) s = transcribe_pending(m, input, &al);
  for (int i = 0; i < al.n; i++) free(al.line[i]);
  free(al.line);
  free(al.nul);
  free(line);
  if (in && in != stdin) fclose(in);
  lv_model_free(m);
  if (s) return s;
  const double secs = al.files ? lv_now_monotonic() - t0 : 0;
  lv_info("decode_audio: %lld files, %.2f s of audio in %.2f s: real-time factor %.4f", (long long)al.files, al.secs,
          secs, al.secs > 0 ? secs / al.secs : 0.0);
  if (al.failed)
    return lv_status_make(LV_ERR_INVALID, "--decode_audio: %lld of %lld files could not be read (the errors above "
                          "name them; their output lines are empty); the others were transcribed",
                          (long long)al.failed, (long long)al.files);
  return NULL;
}

/* Writes the batch's `path<TAB>class<TAB>probability` lines (the most likely class). */
static lv_status classify_batch(lv_model *m, char **paths, int n) {
  lv_class_probs *r = NULL;
  LV_TRY(lv_classify_files(m, NULL, (const char *const *)paths, n, &r));
  for (int i = 0; i < n; i++) {
    const float *p = r->probs + (size_t)i * (size_t)r->num_classes;
    int best = 0;
    for (int k = 1; k < r->num_classes; k++)
      if (p[k] > p[best]) best = k;
    printf("%s\t%d\t%.6f\n", paths[i], best, p[best]);
  }
  lv_class_probs_free(r);
  return lv_file_flush_check(stdout, "stdout");
}

/* --decode_images=LIST: the PNGs LIST names (one path a line; - = stdin), batch at a time. */
static lv_status classify_list(lv_model *m, const char *list, int batch) {
  FILE *in = stdin;
  if (strcmp(list, "-")) LV_TRY(lv_file_fopen_regular(list, "--decode_images", &in));
  char **paths = calloc((size_t)batch, sizeof *paths);
  LV_ASSERT(paths);
  int n = 0;
  lv_status s = NULL;
  char *line = NULL;
  size_t cap = 0;
  for (ssize_t len; !s && (len = getline(&line, &cap, in)) >= 0;) {
    line[strcspn(line, "\r\n")] = 0;
    if (!*line) continue;
    paths[n] = strdup(line);
    LV_ASSERT(paths[n]);
    if (++n == batch) {
      s = classify_batch(m, paths, n);
      for (int i = 0; i < n; i++) free(paths[i]);
      n = 0;
    }
  }
  if (!s && ferror(in)) s = lv_status_make(LV_ERR_IO, "--decode_images=%s: read error", list);
  if (!s && n) s = classify_batch(m, paths, n);
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
  free(line);
  if (in != stdin) fclose(in);
  return s;
}

static lv_status run(int argc, char **argv) {
  lv_cli c;
  lv_cli_init(&c);
  const char *dataset = "Test", *checkpoint = "", *decode_text = "", *decode_audio = "", *score_text = "", *prefix = "";
  int64_t nsample = 0, top_k = -1, seed = -1, batch = 8;
  double temperature = 0;
  bool once = false;
  double max_poll = 300, timeout = 0;
  lv_flag flags[LV_CLI_MAX_FLAGS];
  int n = lv_cli_add_flags(&c, flags, 0);
  flags[n++] = (lv_flag)LV_FLAG_STR("mode", &c.mode, "sync or async (the decoder works the same in both).");
  flags[n++] = (lv_flag)LV_FLAG_STR("dataset", &dataset, "Dataset to decode: Test, Dev, Train or another the experiment defines (e.g. Real) (--job=decoder_<dataset> sets it too).");
  flags[n++] = (lv_flag)LV_FLAG_BOOL("once", &once, "Decode one checkpoint and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("checkpoint", &checkpoint, "With --once, --decode_text, --decode_audio, --score_text or --sample: the checkpoint prefix (or a directory; default: the latest in DIR/train).");
  flags[n++] = (lv_flag)LV_FLAG_F64("max_poll_secs", &max_poll, "Longest wait between polls for a new checkpoint.");
  flags[n++] = (lv_flag)LV_FLAG_F64("timeout_secs", &timeout, "Give up after waiting this long for a new checkpoint (0 = never).");
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_text", &decode_text, "Translate the lines of this file (- = stdin) to stdout and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_audio", &decode_audio, "Transcribe this audio file, the files listed in @LIST, or those of stdin (-), one path<TAB>text line each, and exit.");
  flags[n++] = (lv_flag)LV_FLAG_I64("decode_batch_size", &batch, "With --decode_audio: files transcribed as one batch (padded to the longest).");
  flags[n++] = (lv_flag)LV_FLAG_STR("score_text", &score_text, "A language model: score the lines of this file (- = stdin) and exit.");
  flags[n++] = (lv_flag)LV_FLAG_I64("sample", &nsample, "A language model: write this many continuations of --prefix and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("prefix", &prefix, "With --sample: the text to continue (default: none).");
  flags[n++] = (lv_flag)LV_FLAG_F64("temperature", &temperature, "With --sample: softmax temperature (sets task.decoder.sample_temperature).");
  flags[n++] = (lv_flag)LV_FLAG_I64("top_k", &top_k, "With --sample: draw from the k most likely tokens, 0 = all (task.decoder.sample_top_k).");
  flags[n++] = (lv_flag)LV_FLAG_I64("seed", &seed, "With --sample: the seed (task.decoder.sample_seed).");
  const char *model_file = "", *decode_images = "";
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_images", &decode_images, "Classify the PNG files named by the lines of this file (- = stdin): one path<TAB>class<TAB>probability line each (the most likely class), and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("model_file", &model_file, "A model file (bin/export) instead of --model, --logdir and --checkpoint, with --decode_text, --decode_audio, --score_text or --sample.");
  bool help = false;
  LV_TRY(lv_flags_parse(flags, n, argc, argv, kUsage, &help));
  if (help) return NULL;
  if (*model_file && (*c.model || *c.logdir || *checkpoint || *c.experiments_dir || *c.job ||
                      lv_flags_find(flags, n, "dataset")->set))
    return lv_status_make(LV_ERR_INVALID, "--model_file=%s takes the place of --model, --logdir, --checkpoint, "
                          "--experiments_dir, --dataset and --job: give none of them", model_file);
  if (!*model_file && !*c.logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required (the trainer's log directory)");
  if (max_poll <= 0) return lv_status_make(LV_ERR_INVALID, "--max_poll_secs must be > 0");
  if (!*model_file) LV_TRY(lv_cli_decoder_job(&c, lv_flags_find(flags, n, "dataset")->set, &dataset));
  /* Whether each was given: 0, -1 and "" are also values a user can type. */
  const bool sample_set = lv_flags_find(flags, n, "sample")->set, temp_set = lv_flags_find(flags, n, "temperature")->set,
             top_k_set = lv_flags_find(flags, n, "top_k")->set, seed_set = lv_flags_find(flags, n, "seed")->set;
  if (sample_set && (nsample < 1 || nsample > 1000000))
    return lv_status_make(LV_ERR_INVALID, "--sample=%lld: expected a number of samples in [1, 1000000]",
                          (long long)nsample);
  if (!sample_set && (temp_set || top_k_set || seed_set || lv_flags_find(flags, n, "prefix")->set))
    return lv_status_make(LV_ERR_INVALID, "--prefix, --temperature, --top_k and --seed go with --sample=N");
  if (temp_set && !(temperature > 0))
    return lv_status_make(LV_ERR_INVALID, "--temperature=%g: expected a temperature > 0", temperature);
  if (top_k_set && top_k < 0)
    return lv_status_make(LV_ERR_INVALID, "--top_k=%lld: expected >= 0 (0: all tokens)", (long long)top_k);
  if (seed_set && seed < 0) return lv_status_make(LV_ERR_INVALID, "--seed=%lld: expected >= 0", (long long)seed);
  static const char *const kInputFlags[] = {"decode_text", "decode_audio", "score_text", "decode_images"};
  for (size_t k = 0; k < sizeof kInputFlags / sizeof *kInputFlags; k++) {
    const lv_flag *fl = lv_flags_find(flags, n, kInputFlags[k]);
    if (fl->set && !**(const char **)fl->ptr)
      return lv_status_make(LV_ERR_INVALID, "--%s= is empty: expected a file (- = stdin)", kInputFlags[k]);
  }
  if ((*decode_text != 0) + (*decode_audio != 0) + (*score_text != 0) + (nsample != 0) + (*decode_images != 0) > 1)
    return lv_status_make(LV_ERR_INVALID, "--decode_text, --decode_audio, --score_text, --sample and --decode_images "
                          "exclude each other");
  if (batch < 1 || batch > 4096) return lv_status_make(LV_ERR_INVALID, "--decode_batch_size must be in [1, 4096], got %lld", (long long)batch);
  if (!strcmp(decode_audio, "@")) return lv_status_make(LV_ERR_INVALID, "--decode_audio=@: give a list file after @");
  /* The sampling flags are the LM task's decoder params, given as overrides after the user's. */
  char *ovr = NULL;
  if (nsample) {
    size_t len = 0;
    FILE *f = open_memstream(&ovr, &len);
    LV_ASSERT(f);
    if (temp_set) fprintf(f, "task.decoder.sample_temperature: %.17g\n", temperature);
    if (top_k_set) fprintf(f, "task.decoder.sample_top_k: %lld\n", (long long)top_k);
    if (seed_set) fprintf(f, "task.decoder.sample_seed: %lld\n", (long long)seed);
    fclose(f);
    c.flag_params = ovr; /* after --model_params_override or _file_override, whichever is given */
  }
  if (*decode_images) {
    lv_model *m = NULL;
    lv_status s = api_load(&c, model_file, checkpoint, dataset, NULL, &m);
    if (!s) s = classify_list(m, decode_images, (int)batch);
    lv_model_free(m);
    free(ovr);
    return s;
  }
  if (*model_file && !*decode_text && !*decode_audio && !*score_text && !nsample) {
    free(ovr);
    return lv_status_make(LV_ERR_INVALID, "--model_file decodes --decode_text, --decode_audio, --score_text, "
                          "--sample or --decode_images (the decoder job follows a log directory: use --model and --logdir)");
  }
  lv_params *p = NULL;
  lv_model_file *mf = NULL;
  char assets[LV_PATH_MAX] = "";
  lv_status bs = *model_file ? model_file_params(&c, model_file, &mf, assets, sizeof assets, &p)
                             : lv_cli_build_params(&c, flags, n, dataset, &p);
  if (bs) {
    lv_model_file_free(mf);
    lv_model_file_assets_remove(assets);
    free(ovr);
    return bs;
  }
  /* The line flags are the library's clients (on the GPU too: lv_load_options.gpu). */
  if (*decode_text || *score_text || nsample || *decode_audio) {
    lv_params_free(p);
    lv_model_file_free(mf);
    lv_model_file_assets_remove(assets);
    free(ovr);
    if (*score_text) return score_lines(&c, model_file, checkpoint, dataset, score_text);
    if (*decode_audio) return transcribe_list(&c, model_file, checkpoint, dataset, decode_audio, (int)batch);
    if (nsample) {
      lv_decode_options d;
      lv_decode_options_init(&d);
      if (temp_set) d.temperature = temperature;
      if (top_k_set) d.top_k = top_k > INT_MAX ? INT_MAX : (int)top_k;
      if (seed_set) d.seed = seed;
      return sample_lines(&c, model_file, checkpoint, dataset, &d, prefix, nsample);
    }
    return translate_lines(&c, model_file, checkpoint, dataset, decode_text);
  }
  lv_decoder_options o = {.dataset = dataset, .once = once, .checkpoint = checkpoint, .max_poll_secs = max_poll,
                          .timeout_secs = timeout};
  lv_status s = lv_decoder_run(p, &o);
  lv_params_free(p);
  lv_model_file_free(mf);
  lv_model_file_assets_remove(assets);
  free(ovr);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  return lv_status_report(lv_cli_prog(argv[0]), run(argc, argv));
}
