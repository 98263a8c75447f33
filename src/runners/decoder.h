/* The decoder job (Lingvo's Decoder, job decoder_<dataset>) for any task with a decoder
 * job (lv_task_class's decoder hooks, models/task.h): follows <logdir>/train's
 * checkpoints as the evaler does (runners/follower.h), and for each one runs the
 * dataset's eval pass through the task's decode and post_process_decode_out, writing
 * <logdir>/decoder_<ds>/decoder_out_%09d (the task's key/value pairs: per pair the key's
 * line, the value's lines and an empty line), score-%08d.txt and events with the task's
 * decoder metrics (sorted by tag) and examples/sec, params.txt and processed_ckpts.txt.
 * The runner knows no task: what is decoded, how and how it is scored is the task's.
 *
 * The line flags of bin/decoder (--decode_text, --score_text, ...) are clients of the
 * library (src/api/), which decodes lines with the pieces below. */
#ifndef LV_RUNNERS_DECODER_H
#define LV_RUNNERS_DECODER_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/status.h"
#include "params/params.h"

struct lv_model_file;

typedef struct lv_decoder_options {
  const char *dataset;     /* "Test" */
  bool once;
  const char *checkpoint;  /* with once: a prefix or directory; NULL = latest */
  double max_poll_secs;
  double timeout_secs;
} lv_decoder_options;

lv_status lv_decoder_run(const lv_params *cfg, const lv_decoder_options *opt);

/* The pieces of interactive decoding a client of the library (bin/decoder's line flags)
 * shares; kind names the flag (--<kind>) in messages. The input: "-" (stdin) or a file
 * that is not a directory. */
lv_status lv_decoder_open_input(const char *kind, const char *path, FILE **in);
/* The longest input line kept (bytes): the rest of a longer line is read and dropped, so
 * a line without end (a stream of NULs) cannot exhaust memory; sources are cut far below
 * this anyway (input.source_max_length). */
#define LV_DECODER_MAX_LINE_BYTES ((size_t)1 << 20)
/* The next line of in (named name in errors), without its end of line, into *line
 * (capacity *cap); *len = -1 at end of input. *cut: the line was longer than
 * LV_DECODER_MAX_LINE_BYTES. A read error is an error. */
lv_status lv_decoder_read_line(FILE *in, const char *name, char **line, size_t *cap, ssize_t *len, bool *cut);
/* Writes text and a newline to out and flushes it; a failure names line lineno. */
lv_status lv_decoder_write_line(const char *kind, FILE *out, const char *text, int64_t lineno);

/* The checkpoint interactive decoding and export read: checkpoint (a prefix, or a
 * directory's latest) or, NULL or "", the latest in <cluster.logdir>/train, into prefix;
 * errors start with what. */
lv_status lv_decoder_checkpoint_prefix(const lv_params *cfg, const char *checkpoint, const char *what, char *prefix,
                                       size_t n);

/* A model set up for decoding as interactive decoding sets it up, for the library API
 * (src/api/): cfg's instance (no input), its task's decoder_setup and the scorers its
 * params name (runners/scorers.h); a task without a decode path (the classifier) is set up without decoding. Then
 * lv_line_decoder_restore restores checkpoint (a prefix or a directory's latest; NULL or
 * "": the latest in <logdir>/train), errors starting with what. cfg must outlive it. */
struct lv_model_file;
typedef struct lv_line_decoder lv_line_decoder;
typedef struct lv_instance lv_instance;
/* f: the model file lv_line_decoder_restore_file will restore (its quantized weights then
 * get no float storage on the host: runners/instance.h), or NULL. */
lv_status lv_line_decoder_open(const lv_params *cfg, const struct lv_model_file *f, lv_line_decoder **out);
lv_status lv_line_decoder_restore(lv_line_decoder *ld, const char *checkpoint, const char *what);
/* The same from a model file (runners/model_export.h); the checkpoint is its path. */
lv_status lv_line_decoder_restore_file(lv_line_decoder *ld, const struct lv_model_file *f);
/* Instead of a restore: ld reads src's weights, and its params' fusion LM src's LM's,
 * in place of its own copies (the sessions of one loaded model), with src's checkpoint
 * prefix; false, ld unchanged, when the two models' variables differ. src must outlive
 * ld, and neither may train. */
bool lv_line_decoder_share(lv_line_decoder *ld, lv_line_decoder *src);
lv_instance *lv_line_decoder_instance(lv_line_decoder *ld);
/* Its task's scorers (runners/scorers.h): the params' fusion LM, to which a caller may add. */
struct lv_scorers *lv_line_decoder_scorers(lv_line_decoder *ld);
/* The checkpoint prefix restored. */
const char *lv_line_decoder_checkpoint(const lv_line_decoder *ld);
void lv_line_decoder_close(lv_line_decoder *ld);

#endif
