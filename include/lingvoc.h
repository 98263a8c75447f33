/* lingvoc.h: the lingvoc library (liblingvoc), the one header a program includes.
 *
 * Load a trained model (a model file from bin/export, or an experiment name, e.g.
 * "mt.bible_en_es.TransformerSmall", and the trainer's log directory, as bin/decoder
 * does), then call one function per kind of
 * work, named after Lingvo's Inference() subgraphs:
 *
 *   lv_translate      source strings -> top-k strings with scores (MT, the punctuator)
 *   lv_transcribe     audio files or 16 kHz float samples -> top-k hypotheses (ASR)
 *   lv_score_text     strings -> per-token and total log-probabilities (LMs)
 *   lv_sample_text    a prefix -> sampled continuations (LMs)
 *   lv_classify       uint8 images or PNG files -> class probabilities (image classifiers)
 *
 * Errors: every function that can fail returns an lv_status: NULL on success, else an
 * error the caller owns (lv_status_msg, lv_status_error, lv_status_free) whose message
 * names the file, parameter or input at fault. The library never exits and never writes
 * to stdout or stderr: what it would log goes to the load options' log callback (none by
 * default). Programmer errors (a NULL handle) abort with file:line, as assert() does.
 *
 * Ownership: results are the caller's, freed by the result's free function; strings
 * passed in are copied or read during the call only.
 *
 * Threads: an lv_model is immutable after lv_model_load and may be shared by any number
 * of threads; search state lives in an lv_session, which one thread uses at a time. Give
 * each thread its own session (lv_session_new): one model used by several threads at
 * once, each with its own session, gives the same results as one thread. A NULL session
 * means the model's own session, which the library serializes (a lock per model): simple
 * programs never make a session. Each session today holds its own copy of the weights. */
#ifndef LINGVOC_H
#define LINGVOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LINGVOC_API __attribute__((visibility("default")))
#else
#define LINGVOC_API
#endif

#define LINGVOC_VERSION_MAJOR 0
#define LINGVOC_VERSION_MINOR 1
#define LINGVOC_VERSION_PATCH 0
#define LINGVOC_VERSION "0.1.0"
/* The library's version as "MAJOR.MINOR.PATCH" (may differ from the header's). */
LINGVOC_API const char *lv_version(void);

/* ---- errors ---- */
typedef struct lv_status_s *lv_status; /* NULL: success */
/* What kind of error (lv_status_error): the user must change an argument, option or
 * config; a file, model or key that does not exist; a file that failed validation; the
 * OS refused; out of memory; a bug; interrupted. */
#define LV_STATUS_OK 0
#define LV_STATUS_INVALID 1
#define LV_STATUS_NOT_FOUND 2
#define LV_STATUS_CORRUPT 3
#define LV_STATUS_IO 4
#define LV_STATUS_RESOURCE 5
#define LV_STATUS_INTERNAL 6
#define LV_STATUS_CANCELLED 7
LINGVOC_API const char *lv_status_msg(lv_status s); /* valid until lv_status_free */
LINGVOC_API int lv_status_error(lv_status s);        /* LV_STATUS_* (OK for NULL) */
LINGVOC_API void lv_status_free(lv_status s);        /* NULL is fine */

/* ---- loading ---- */
typedef struct lv_model lv_model;
typedef struct lv_session lv_session;

/* A log line the library would have printed: level 0 debug, 1 info, 2 warning, 3 error. */
typedef void (*lv_log_callback)(void *user, int level, const char *message);

/* A language model added to beam search (shallow fusion): a loaded lv_model of an LM over
 * the searching model's target vocabulary, and its weight (>= 0). */
typedef struct lv_scorer_spec {
  lv_model *model;
  double weight;
} lv_scorer_spec;
/* Decoding options: fields left at their defaults (lv_decode_options_init) keep what the
 * experiment sets (task.decoder...). An option the model has no use for (a beam size for
 * a language model) is an error naming the param it would set. */
typedef struct lv_decode_options {
  int num_hyps;                /* 0: task.decoder.beam_search.num_hyps_per_beam (beam width = n-best) */
  double beam_size;            /* < 0: beam_search.beam_size (score margin of kept hyps) */
  double length_normalization; /* < 0: beam_search.length_normalization */
  double coverage_penalty;     /* < 0: beam_search.coverage_penalty */
  int target_seq_len;          /* 0: task.decoder.target_seq_len (longest output) */
  double fusion_lm_weight;     /* < 0: task.decoder.fusion.lm_weight (shallow fusion, when the experiment names an LM) */
  double temperature;          /* <= 0: task.decoder.sample_temperature (lv_sample_text) */
  int top_k;                   /* < 0: task.decoder.sample_top_k (0 = all tokens) */
  int64_t seed;                /* < 0: task.decoder.sample_seed */
  int batch_size;              /* 0: 8; inputs decoded as one batch (lv_transcribe, lv_classify) */
  int keep_going;              /* 0: an input that cannot be read (an audio file) fails the call; 1: its
                                  lv_nbest.error says why, its n is 0, and the others are decoded */
  const lv_scorer_spec *scorers; /* n_scorers language models each search adds to the model's decoder, after
                                    the experiment's task.decoder.fusion LM if it names one (Marian's scorers);
                                    a session copies the list and takes its own copy of each LM's weights */
  int n_scorers;
} lv_decode_options;
LINGVOC_API void lv_decode_options_init(lv_decode_options *o);

typedef struct lv_load_options {
  const char *model;           /* required: the experiment, e.g. "mt.bible_en_es.TransformerSmall" */
  const char *logdir;          /* required: the trainer's --logdir */
  const char *checkpoint;      /* NULL: the latest in <logdir>/train; else a prefix or a directory */
  const char *experiments_dir; /* NULL: $LINGVOC_EXPERIMENTS, <program dir>/../experiments, ./experiments */
  const char *dataset;         /* NULL: "Test" (whose input params give the tokenizer) */
  const char *params_override; /* NULL, or "a.b: v; c: w" as --model_params_override */
  const char *params_file_override; /* NULL, or a file as --model_params_file_override */
  int num_threads;             /* 0: the experiment's cluster.num_threads. Sets the process's
                                  BLAS/OpenMP thread count (process-wide) */
  lv_decode_options decode;    /* the model's own session's options, and lv_session_new's with NULL */
  lv_log_callback log;         /* NULL: the library logs nothing */
  void *log_user;
  int log_level;               /* lines of at least this level reach log (default 2: warnings) */
  int gpu;                     /* 1: the model's variables and every session's search on the first
                                  GPU (cuda:0: a CUDA build, make CUDA=1, on a machine with a GPU;
                                  elsewhere lv_model_load says so); 0: the CPU */
} lv_load_options;
LINGVOC_API void lv_load_options_init(lv_load_options *o);

/* Loads the model (params, checkpoint; the model's own session). Thread-safe. */
LINGVOC_API lv_status lv_model_load(const lv_load_options *o, lv_model **out);
/* Loads a model file (bin/export's, or bin/trainer --mode=write_inference_graph's): its
 * params, tokenizer and weights, with no experiments tree or log directory. o may be NULL
 * (defaults); its params_override / params_file_override, num_threads, decode and log
 * fields apply, and model, logdir, checkpoint, experiments_dir and dataset must be NULL.
 * A corrupt, truncated or foreign file, or one of a newer format version, is an error
 * naming the file and what is wrong. The tokenizer's files are written to a private
 * directory under $TMPDIR for the model's life. Thread-safe. */
LINGVOC_API lv_status lv_model_load_file(const char *path, const lv_load_options *o, lv_model **out);
/* Frees the model; its sessions must be freed first. NULL is fine. */
LINGVOC_API void lv_model_free(lv_model *m);
/* The model's task class, e.g. "mt.model.TransformerModel", "lm.model.LanguageModel",
 * "asr.model.AsrModel", "classifier.ModelV1", "punctuator.model.RNMTModel". */
LINGVOC_API const char *lv_model_task(const lv_model *m);
/* The checkpoint prefix the model was loaded from (a model file: its path). */
LINGVOC_API const char *lv_model_checkpoint(const lv_model *m);

/* A session: search state for one thread at a time, with its own decode options (NULL:
 * the model's). Thread-safe with respect to the model. */
LINGVOC_API lv_status lv_session_new(lv_model *m, const lv_decode_options *o, lv_session **out);
LINGVOC_API void lv_session_free(lv_session *s);

/* ---- results ---- */
/* n_items inputs, each with n[i] hypotheses (0 for an input with nothing to decode, e.g.
 * an empty line), best first: text[i][h] and score[i][h] (the search's score: a
 * log-probability, length-normalized as the options say). */
typedef struct lv_nbest {
  int n_items;
  int *n;
  char ***text;
  float **score;
  char **error;    /* [n_items]: with keep_going, why input i was not decoded; else NULL */
  double *seconds; /* [n_items]: lv_transcribe*: seconds of audio read (0 for text) */
} lv_nbest;
LINGVOC_API void lv_nbest_free(lv_nbest *r);

/* Per line: the total log-probability (natural log), the number of tokens scored (with
 * </s>) and each token's log-probability. A line with nothing to score (invalid UTF-8)
 * has n_tokens 0 and logprob 0. */
typedef struct lv_scores {
  int n_items;
  double *logprob;
  int *n_tokens;
  float **token_logprob; /* [n_items][n_tokens[i]] */
} lv_scores;
LINGVOC_API void lv_scores_free(lv_scores *r);

typedef struct lv_texts {
  int n;
  char **text;
} lv_texts;
LINGVOC_API void lv_texts_free(lv_texts *r);

/* [n, num_classes] probabilities, row-major. */
typedef struct lv_class_probs {
  int n, num_classes;
  float *probs;
} lv_class_probs;
LINGVOC_API void lv_class_probs_free(lv_class_probs *r);

/* ---- work: one call per kind. Each call on a session (NULL: the model's own) ----
 * A model of another kind is LV_STATUS_INVALID, saying which calls it takes. */

/* Translates (or punctuates) n source strings: up to k hypotheses each (k <= the
 * session's num_hyps; k <= 0: 1), best first. Lines as bin/decoder --decode_text reads
 * them: invalid UTF-8 or an empty line gives no hypothesis. Log messages number a
 * session's sources across its calls (here and in lv_score_text): the first source of
 * its first call is line 1, so a program that translates a file line by line gets
 * bin/decoder's line numbers. */
LINGVOC_API lv_status lv_translate(lv_model *m, lv_session *s, const char *const *src, int n, int k, lv_nbest **out);

/* Transcribes n audio files (WAV, FLAC, OGG; any rate, resampled to 16 kHz and mixed to
 * mono). Silence gives no hypothesis; an unreadable file is an error naming it. */
LINGVOC_API lv_status lv_transcribe_files(lv_model *m, lv_session *s, const char *const *paths, int n, int k,
                                          lv_nbest **out);
/* The most files one batch of lv_transcribe_files holds within the decoder's memory
 * budget for files of the model's longest input (0: no limit, or not an ASR model); a
 * larger batch_size is cut to it. */
LINGVOC_API int lv_transcribe_batch_limit(lv_model *m);
/* The same for one utterance of 16 kHz mono float samples in [-1, 1]. */
LINGVOC_API lv_status lv_transcribe(lv_model *m, lv_session *s, const float *samples, int64_t n_samples, int k,
                                    lv_nbest **out);

/* Scores n lines with a language model. */
LINGVOC_API lv_status lv_score_text(lv_model *m, lv_session *s, const char *const *lines, int n, lv_scores **out);

/* n continuations of prefix ("" or NULL: none); sample i draws from stream i of the
 * session's seed, so a seed repeats its samples. */
LINGVOC_API lv_status lv_sample_text(lv_model *m, lv_session *s, const char *prefix, int n, lv_texts **out);
/* Samples first .. first + n - 1 of the same (streams first + 1 ..): lv_sample_text is
 * first 0, so a program may draw a long run of samples a few at a time. */
LINGVOC_API lv_status lv_sample_text_from(lv_model *m, lv_session *s, const char *prefix, int64_t first, int n,
                                          lv_texts **out);

/* Class probabilities of n uint8 images [n, height, width, channels] (row-major), which
 * must have the experiment's input.data_shape; preprocessed as the experiment's input is
 * (the task's per-image standardization). */
LINGVOC_API lv_status lv_classify(lv_model *m, lv_session *s, const uint8_t *images, int n, int height, int width,
                                  int channels, lv_class_probs **out);

/* The same for n PNG files (gray for a model of depth 1, RGB for 3), each of the
 * experiment's input.data_shape size (no resizing: another size is an error naming the
 * file, as is a file that is not a PNG). */
LINGVOC_API lv_status lv_classify_files(lv_model *m, lv_session *s, const char *const *paths, int n,
                                        lv_class_probs **out);

#ifdef __cplusplus
}
#endif

#endif
