/* The input-class registry and the dispatching front end. */
#include "input/input.h"

#include <pthread.h>
#include <string.h>

#include "base/names.h"

#define X(sym) extern const lv_input_class sym;
#include "input/inputs.def"
#undef X

static const lv_input_class *const kInputs[] = {
#define X(sym) &sym,
#include "input/inputs.def"
#undef X
};

const lv_input_class *lv_input_class_find(const char *cls) {
  for (size_t i = 0; i < LV_ARRAY_LEN(kInputs); i++)
    if (!strcmp(kInputs[i]->cls, cls)) return kInputs[i];
  return NULL;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  for (size_t i = 0; i < LV_ARRAY_LEN(kInputs); i++) lv_registry_add(kInputs[i]->cls, kInputs[i]->params);
}
void lv_input_register_all(void) { pthread_once(&g_once, register_all); }

lv_status lv_input_create(const lv_params *p, lv_input_shard shard, lv_input **out) {
  *out = NULL;
  const char *cls = lv_params_str(p, "cls");
  const lv_input_class *c = lv_input_class_find(cls ? cls : "");
  if (!c) {
    const char *names[LV_ARRAY_LEN(kInputs)];
    for (size_t i = 0; i < LV_ARRAY_LEN(kInputs); i++) names[i] = kInputs[i]->cls;
    char known[512];
    lv_names_join(names, (int)LV_ARRAY_LEN(kInputs), ", ", known, sizeof known);
    return lv_status_make(LV_ERR_INVALID, "input.cls: \"%s\" is not an input class (known: %s)", cls ? cls : "",
                          known);
  }
  if (shard.num_replicas < 1 || shard.replica < 0 || shard.replica >= shard.num_replicas)
    return lv_status_make(LV_ERR_INVALID, "input: replica %d of %d is not a valid shard", shard.replica,
                          shard.num_replicas);
  LV_TRY(c->create(p, shard, out));
  (*out)->cls = c;
  (*out)->p = p;
  (*out)->shard = shard;
  return NULL;
}

void lv_input_destroy(lv_input *in) {
  if (in) in->cls->destroy(in);
}
int64_t lv_input_num_samples(const lv_input *in) { return in->cls->num_samples(in); }
int64_t lv_input_batch_size(const lv_input *in) { return in->cls->batch_size(in); }
int64_t lv_input_buffer_peak_bytes(const lv_input *in) {
  return in->cls->buffer_peak_bytes ? in->cls->buffer_peak_bytes(in) : 0;
}
lv_status lv_input_train_batch(lv_input *in, int64_t step, lv_batch *out) {
  return in->cls->train_batch(in, step, out);
}
lv_status lv_input_reset(lv_input *in) { return in->cls->reset(in); }
lv_status lv_input_next_eval(lv_input *in, lv_batch *out, bool *done) { return in->cls->next_eval(in, out, done); }
