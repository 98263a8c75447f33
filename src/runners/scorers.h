/* The scorers an experiment's params name for its task's beam searches, beside the
 * task's own decoder (Marian's createScorers; search/beam_search.h's lv_scorer): today
 * task.decoder.fusion's language model (search/lm_fusion.h: shallow fusion is one scorer
 * type), built from its experiment and checkpoint beside the model's and owned here. A
 * caller may add scorers it made (the library API's LMs of other loaded models). The
 * decoder job and the library hold a list and hand it to the task; neither knows what
 * is in it. */
#ifndef LV_RUNNERS_SCORERS_H
#define LV_RUNNERS_SCORERS_H

#include "base/status.h"
#include "search/beam_search.h"
#include "models/task.h"
#include "params/params.h"

typedef struct lv_scorers lv_scorers;

/* cfg's scorers (none when task.decoder.fusion names no LM; with an lm_weight but no
 * lm_model, a warning), given to task t (lv_task_set_scorers). Errors name the param.
 * *out is made also on error (lv_scorers_close frees it). cfg must outlive it. */
lv_status lv_scorers_open(const lv_params *cfg, lv_task *t, lv_scorers **out);
/* Appends sc (kept, not owned: the caller's until lv_scorers_close) and gives t the list. */
lv_status lv_scorers_add(lv_scorers *s, lv_task *t, const lv_scorer *sc);
int lv_scorers_count(const lv_scorers *s);
/* dst's params' scorers read src's weights where the two hold the same model (the
 * sessions of one loaded model: one copy of a fusion LM); the others keep their own. */
void lv_scorers_share(lv_scorers *dst, lv_scorers *src);
/* The frozen params of the LM that cfg's task.decoder.fusion names by experiment
 * (lm_model, lm_params_override) and its checkpoint prefix (lm_logdir / lm_checkpoint), as
 * decoding builds it; *lm_cfg NULL when cfg fuses no LM or takes it from lm_model_file. */
lv_status lv_scorers_fusion_lm(const lv_params *cfg, lv_params **lm_cfg, char *prefix, size_t n);
/* Takes the list from t (NULL: none) and frees what the params' scorers hold. NULL is fine. */
void lv_scorers_close(lv_scorers *s, lv_task *t);

#endif
