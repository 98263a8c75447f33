/* Export to and load from model files (model_export.h). */
#include "runners/model_export.h"

#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "core/variable.h"
#include "kernels/kernel_math.h"
#include "kernels/qweight.h"
#include "layers/qdomain.h"
#include "models/model.h"
#include "runners/decoder.h"
#include "runners/scorers.h"

/* Params leaves that name a file inference reads (the tokenizers'): stored as assets. */
static const char *const kAssetLeaves[] = {"vocab_filepath", "spm_model", "token_vocab_filepath",
                                           "ngram_vocab_filepath", "lm_model_file"};
/* Params leaves only training and evaluation read: cleared in a model file. */
static const char *const kClearedLeaves[] = {"file_pattern"};

static bool leaf_in(const char *key, const char *const *leaves, size_t n) {
  const char *dot = strrchr(key, '.');
  const char *leaf = dot ? dot + 1 : key;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(leaf, leaves[i])) return true;
  return false;
}

typedef struct key_list {
  char **key;
  int n, cap;
} key_list;

/* The dotted keys of p's string values whose leaf is in leaves (lists of params are
 * not entered: no tokenizer lives in one). */
static void find_keys(const lv_params *p, const char *prefix, const char *const *leaves, size_t nl, key_list *out) {
  for (int i = 0; i < lv_params_num_keys(p); i++) {
    char key[512];
    snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", lv_params_key(p, i));
    const char *name = lv_params_key(p, i);
    lv_pv_kind k = lv_params_kind(p, name);
    if (k == LV_PV_PARAMS) {
      const lv_params *sub = lv_params_sub(p, name);
      if (sub) find_keys(sub, key, leaves, nl, out);
    } else if (k == LV_PV_STRING && lv_params_is_set(p, name) && *lv_params_str(p, name) && leaf_in(key, leaves, nl)) {
      if (out->n == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 8;
        out->key = realloc(out->key, sizeof *out->key * (size_t)out->cap);
        LV_ASSERT(out->key);
      }
      out->key[out->n] = strdup(key);
      LV_ASSERT(out->key[out->n]);
      out->n++;
    }
  }
}

static void key_list_free(key_list *l) {
  for (int i = 0; i < l->n; i++) free(l->key[i]);
  free(l->key);
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

typedef struct export_state {
  lv_params *p; /* cfg's copy, as stored */
  key_list assets;
  char **asset_data;
  lv_mf_asset *a;
  lv_mf_tensor *t;
  void **host;
  int nt;
} export_state;

static void export_state_free(export_state *e) {
  for (int i = 0; i < e->assets.n; i++) free(e->asset_data ? e->asset_data[i] : NULL);
  free(e->asset_data);
  free(e->a);
  key_list_free(&e->assets);
  for (int i = 0; i < e->nt; i++) free(e->host[i]);
  free(e->host);
  free(e->t);
  lv_params_free(e->p);
}

/* The stored params and assets: asset params read and replaced by their base names,
 * file patterns cleared, the logdir dropped (it names the exporting machine's). */
static lv_status export_params(const lv_params *cfg, export_state *e) {
  e->p = lv_params_copy(cfg);
  LV_TRY(lv_params_set_string(e->p, "cluster.logdir", ""));
  key_list cleared = {0};
  find_keys(cfg, "", kClearedLeaves, LV_ARRAY_LEN(kClearedLeaves), &cleared);
  lv_status s = NULL;
  for (int i = 0; !s && i < cleared.n; i++) s = lv_params_set_string(e->p, cleared.key[i], "");
  key_list_free(&cleared);
  LV_TRY(s);
  find_keys(cfg, "", kAssetLeaves, LV_ARRAY_LEN(kAssetLeaves), &e->assets);
  e->asset_data = calloc((size_t)e->assets.n + 1, sizeof *e->asset_data);
  e->a = calloc((size_t)e->assets.n + 1, sizeof *e->a);
  LV_ASSERT(e->asset_data && e->a);
  for (int i = 0; i < e->assets.n; i++) {
    const char *key = e->assets.key[i], *path = lv_params_str(cfg, key);
    size_t len = 0;
    LV_TRY(lv_status_wrap(lv_file_read_all(path, &e->asset_data[i], &len), "%s", key));
    for (int j = 0; j < i; j++)
      if (!strcmp(e->a[j].name, base_name(path)) && strcmp(lv_params_str(cfg, e->a[j].key), path))
        return lv_status_make(LV_ERR_INVALID, "%s and %s name two files called %s: a model file keeps base names",
                              e->a[j].key, key, base_name(path));
    e->a[i] = (lv_mf_asset){.key = key, .name = base_name(path), .data = e->asset_data[i], .size = len};
    LV_TRY(lv_params_set_string(e->p, key, base_name(path)));
  }
  return NULL;
}

/* Quantizes e->t[i] (a float32 [rows, cols] on the host) in place as type qt: per channel
 * (symmetric, from each channel's largest value), or with grid > 0 each channel whose
 * values lie on that grid as its levels (a QAT grid, lv_qtype_traits.quantize_grid;
 * *grid_channels and *clamped count). An error for a variable with a NaN or an infinity
 * (its scales would be NaN). */
static lv_status quantize_tensor(export_state *e, int i, lv_qtype qt, int axis, float grid, int64_t *grid_channels,
                                 int64_t *clamped) {
  lv_mf_tensor *t = &e->t[i];
  const lv_qtype_traits *tr = lv_qtype_traits_of(qt);
  const int64_t rows = t->shape.d[0], cols = t->shape.d[1], nch = axis ? cols : rows;
  const size_t qbytes = (size_t)(rows * cols) * tr->elem_bytes, at = (qbytes + 3) & ~(size_t)3;
  /* The scales live in the same allocation, after the values. */
  char *buf = malloc(at + sizeof(float) * (size_t)nch);
  LV_ASSERT(buf);
  float *scales = (float *)(buf + at);
  if (grid > 0 && tr->quantize_grid)
    *grid_channels += tr->quantize_grid(e->host[i], rows, cols, axis, grid, buf, scales, clamped);
  else
    tr->quantize(e->host[i], rows, cols, axis, buf, scales);
  for (int64_t c = 0; c < (axis ? cols : rows); c++)
    if (!isfinite(scales[c])) {
      free(buf);
      return lv_status_make(LV_ERR_INVALID, "--quantize=%s: variable %s has a NaN or an infinity in %s %lld: cannot "
                            "quantize it", lv_qtype_names[qt], t->name, axis ? "column" : "row", (long long)c);
    }
  free(e->host[i]);
  e->host[i] = buf;
  t->data = buf;
  t->size = qbytes;
  t->quantized = true;
  t->qtype = qt;
  t->axis = axis;
  t->scales = scales;
  return NULL;
}

/* The model's variables, copied to the host. */
static lv_status export_tensors(lv_instance *m, export_state *e) {
  int n = 0;
  lv_saveable *items = lv_instance_saveables(m, &n);
  e->t = calloc((size_t)n + 1, sizeof *e->t);
  e->host = calloc((size_t)n + 1, sizeof *e->host);
  LV_ASSERT(e->t && e->host);
  lv_status s = NULL;
  for (int i = 0; !s && i < n; i++) {
    const size_t bytes = (size_t)lv_shape_numel(&items[i].shape) * lv_dtype_size(items[i].dtype);
    e->host[i] = malloc(bytes + 1);
    LV_ASSERT(e->host[i]);
    e->nt = i + 1;
    lv_tensor t = lv_tensor_view(items[i].dtype, items[i].shape, items[i].data);
    t.device = items[i].device;
    s = lv_tensor_to_host(&t, e->host[i]);
    e->t[i] = (lv_mf_tensor){.name = items[i].name, .dtype = items[i].dtype, .shape = items[i].shape,
                             .data = e->host[i], .size = bytes};
  }
  free(items);
  return s;
}

/* A QAT weight v's values at inference into host (its domain's QWeight on an eval graph
 * at the checkpoint's step, as the decoder computes them) and the step of the grid they
 * lie on (0: none, a clip-only schedule). */
static lv_status qat_weight(lv_instance *m, lv_var *v, float *host, float *step) {
  lv_graph *g = m->graph;
  lv_graph_reset(g);
  lv_graph_set_training(g, false);
  lv_graph_set_step(g, lv_instance_step(m));
  lv_tensor *y = lv_qdomain_weight(v->qdomain, g, &v->value);
  lv_status s = y ? lv_tensor_to_host(y, host) : lv_graph_status(g);
  lv_graph_reset(g);
  float mn = 0, mx = 0;
  int bits = 0;
  *step = 0;
  if (!s && lv_qdomain_weight_range(v->qdomain, &v->value, &mn, &mx, &bits) && bits > 0 && bits <= 16)
    *step = lv_kfq_nudge(mn, mx, 0, (1 << bits) - 1, true).scale;
  return lv_status_wrap(s, "--quantize: %s's quantization domain", v->name);
}

/* Every rank-2 float32 variable quantized as qt (model_export.h). */
static lv_status quantize_tensors(lv_instance *m, export_state *e, lv_qtype qt, lv_export_info *info) {
  int64_t clamped = 0, channels = 0;
  for (int i = 0; i < e->nt; i++) {
    lv_var *v = lv_varstore_get(m->vs, i);
    if (e->t[i].dtype != LV_F32 || e->t[i].shape.rank != 2 || strcmp(v->name, e->t[i].name)) continue;
    float step = 0;
    /* A QAT weight at its inference values; a type with quantize_grid (int8) keeps the
     * domain's grid where it can (quantize_tensor). */
    if (v->qdomain) LV_TRY(qat_weight(m, v, e->host[i], &step));
    const int axis = v->lp_looked_up_rows ? 0 : 1;
    LV_TRY(quantize_tensor(e, i, qt, axis, step, &info->n_qat_grid_channels, &clamped));
    info->n_quantized++;
    if (v->qdomain) {
      info->n_qat++;
      channels += e->t[i].shape.d[axis ? 1 : 0];
    }
  }
  if (info->n_qat && lv_qtype_traits_of(qt)->quantize_grid)
    lv_info("export: %d weights of quantization domains at their inference values; %lld of their %lld channels on "
            "the domain's grid (%lld values clamped into int8 from one level past it), the others rescaled",
            info->n_qat, (long long)info->n_qat_grid_channels, (long long)channels, (long long)clamped);
  return NULL;
}

/* A fusion LM that cfg names by experiment (task.decoder.fusion.lm_model + its logdir or
 * checkpoint), exported (quantized as the model) into a new private directory *dir as lm.lvm; *fused is then cfg's
 * copy with lm_model_file naming it and the LM's checkpoint params cleared (the model
 * file stores that file as lm_model_file's asset). Both stay NULL / empty without one. */
static lv_status export_fusion_lm(const lv_params *cfg, const char *quantize, char *dir, size_t n,
                                  lv_params **fused) {
  lv_params *lm_cfg = NULL;
  char prefix[LV_PATH_MAX], path[LV_PATH_MAX];
  dir[0] = 0;
  *fused = NULL;
  LV_TRY(lv_scorers_fusion_lm(cfg, &lm_cfg, prefix, sizeof prefix));
  if (!lm_cfg) return NULL;
  const char *tmp = getenv("TMPDIR");
  lv_status s = lv_path_fmt(dir, n, "%s/lingvoc-export-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!s && !mkdtemp(dir)) {
    s = lv_status_make(LV_ERR_IO, "export: cannot make a directory for the fusion LM's model file (%s): %s", dir,
                       strerror(errno));
    dir[0] = 0;
  }
  if (!s) s = lv_path_fmt(path, sizeof path, "%s/lm.lvm", dir);
  lv_export_info lm_info;
  if (!s) s = lv_status_wrap(lv_export_model_file(lm_cfg, prefix, quantize, path, &lm_info), "task.decoder.fusion: the LM %s",
                             lv_params_str(cfg, "task.decoder.fusion.lm_model"));
  lv_params_free(lm_cfg);
  if (s) return s;
  lv_params *p = lv_params_copy(cfg);
  static const char *const kCleared[] = {"lm_logdir", "lm_checkpoint", "lm_params_override"};
  for (size_t i = 0; !s && i < LV_ARRAY_LEN(kCleared); i++) {
    char key[96];
    snprintf(key, sizeof key, "task.decoder.fusion.%s", kCleared[i]);
    s = lv_params_set_string(p, key, "");
  }
  if (!s) s = lv_params_set_string(p, "task.decoder.fusion.lm_model_file", path);
  if (s) {
    lv_params_free(p);
    return s;
  }
  lv_info("export: the fusion LM %s (%s, step %lld) goes into the model file", lv_params_str(cfg,
          "task.decoder.fusion.lm_model"), lm_info.checkpoint, (long long)lm_info.step);
  *fused = p;
  return NULL;
}

lv_status lv_export_model_file(const lv_params *cfg, const char *checkpoint, const char *quantize,
                               const char *out_path, lv_export_info *info) {
  memset(info, 0, sizeof *info);
  lv_qtype qt = LV_QTYPE_INT8;
  const bool quantized = quantize && *quantize;
  if (quantized && !lv_qtype_from_name(quantize, &qt))
    return lv_status_make(LV_ERR_INVALID, "--quantize=%s: expected int8 or bf16 (or nothing: float32)", quantize);
  LV_TRY(lv_decoder_checkpoint_prefix(cfg, checkpoint, "export", info->checkpoint, sizeof info->checkpoint));
  export_state e = {0};
  lv_instance *m = NULL;
  char lm_dir[LV_PATH_MAX];
  lv_params *fused = NULL;
  lv_status s = export_fusion_lm(cfg, quantize, lm_dir, sizeof lm_dir, &fused);
  if (!s) s = export_params(fused ? fused : cfg, &e);
  if (!s) s = lv_instance_create(cfg, false, lv_input_no_shard(), &m);
  if (!s) s = lv_instance_restore(m, info->checkpoint, &info->n_averages);
  if (!s) s = export_tensors(m, &e);
  if (!s && quantized) s = quantize_tensors(m, &e, qt, info);
  char *text = NULL;
  if (!s) {
    text = lv_params_to_text(e.p);
    s = lv_model_file_write(out_path, text, e.a, e.assets.n, e.t, e.nt);
  }
  if (!s) {
    info->step = lv_instance_step(m);
    info->n_tensors = e.nt;
    info->n_assets = e.assets.n;
    lv_model_file *check = NULL;
    s = lv_status_wrap(lv_model_file_read(out_path, &check), "reading back what export wrote");
    if (!s) info->bytes = check->file_size;
    lv_model_file_free(check);
  }
  free(text);
  lv_instance_destroy(m);
  export_state_free(&e);
  lv_params_free(fused);
  if (lm_dir[0]) lv_model_file_assets_remove(lm_dir);
  return s;
}

/* ---- loading ---- */

/* A file of the private directory: no fsync (it lives as long as the process uses it). */
static lv_status write_private(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wbx");
  if (!f) return lv_status_make(LV_ERR_IO, "cannot create %s: %s", path, strerror(errno));
  bool ok = fwrite(data, 1, n, f) == n;
  if (fclose(f) != 0 || !ok) return lv_status_make(LV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return NULL;
}

lv_status lv_model_file_assets_dir(const lv_model_file *f, char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR");
  LV_TRY(lv_path_fmt(dir, n, "%s/lingvoc-model-XXXXXX", tmp && *tmp ? tmp : "/tmp"));
  if (!mkdtemp(dir)) {
    lv_status s = lv_status_make(LV_ERR_IO, "model file %s: cannot make a directory for its assets (%s): %s", f->path,
                                 dir, strerror(errno));
    dir[0] = 0;
    return s;
  }
  for (int i = 0; i < f->n_assets; i++) {
    char path[LV_PATH_MAX];
    lv_status s = lv_path_fmt(path, sizeof path, "%s/%s", dir, f->assets[i].name);
    if (!s) s = write_private(path, f->assets[i].data, f->assets[i].size);
    if (s) {
      lv_model_file_assets_remove(dir);
      dir[0] = 0;
      return lv_status_wrap(s, "model file %s: asset %s", f->path, f->assets[i].key);
    }
  }
  return NULL;
}

void lv_model_file_assets_remove(const char *dir) {
  if (!dir || !*dir) return;
  DIR *d = opendir(dir);
  if (d) {
    for (struct dirent *e; (e = readdir(d));) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char path[LV_PATH_MAX];
      if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

lv_status lv_model_file_params(const lv_model_file *f, const char *assets_dir, const char *override,
                               const char *override_file, const char *flag_params, int64_t num_threads,
                               lv_params **out) {
  *out = NULL;
  char source[LV_PATH_MAX + 16];
  snprintf(source, sizeof source, "%s (params)", f->path);
  lv_params *p = NULL;
  LV_TRY(lv_model_params_from_text(f->params_text, source, &p));
  lv_status s = NULL;
  for (int i = 0; !s && i < f->n_assets; i++) {
    char path[LV_PATH_MAX];
    s = lv_path_fmt(path, sizeof path, "%s/%s", assets_dir, f->assets[i].name);
    if (!s && !lv_params_has(p, f->assets[i].key))
      s = lv_status_make(LV_ERR_CORRUPT, "model file %s: asset %s for params key %s, which the params do not have",
                         f->path, f->assets[i].name, f->assets[i].key);
    if (!s) s = lv_params_set_string(p, f->assets[i].key, path);
  }
  if (!s) s = lv_params_apply_overrides(p, override, override_file);
  if (!s && flag_params && *flag_params) s = lv_params_from_text(p, flag_params, "<flags>");
  if (!s && num_threads > 0) s = lv_params_set_int(p, "cluster.num_threads", num_threads);
  if (s) {
    lv_params_free(p);
    return s;
  }
  lv_params_freeze(p);
  *out = p;
  return NULL;
}

static lv_status pack_error(const lv_model_file *f, const lv_mf_tensor *t) {
  return lv_status_make(LV_ERR_RESOURCE, "model file %s: cannot pack %s %s [%lld, %lld] (out of memory, or more rows "
                        "than the int8 GEMM sums exactly)", f->path, lv_qtype_dtype_names[t->qtype], t->name,
                        (long long)t->shape.d[0], (long long)t->shape.d[1]);
}

/* A quantized tensor into variable v (item it): a deferred variable's twin alone (a
 * matmul weight's packed form, a gather table's rows), else its float values and, for a
 * host matmul weight, its twin. */
static lv_status restore_quantized(const lv_model_file *f, const lv_mf_tensor *t, lv_var *v, const lv_saveable *it) {
  const lv_qtype_traits *tr = lv_qtype_traits_of(t->qtype);
  const int64_t rows = t->shape.d[0], cols = t->shape.d[1];
  if (v->deferred) {
    lv_qweight *q = t->axis ? lv_qweight_new(t->qtype, t->data, t->scales, rows, cols)
                            : lv_qweight_new_rows(t->qtype, t->data, t->scales, rows, cols);
    if (!q) return pack_error(f, t);
    lv_var_set_quant(v, q);
    return NULL;
  }
  float *x = malloc(sizeof(float) * (size_t)(rows * cols) + 1);
  LV_ASSERT(x);
  tr->dequantize(t->data, t->scales, rows, cols, t->axis, x);
  lv_tensor val = lv_tensor_view(it->dtype, it->shape, it->data);
  val.device = it->device;
  lv_status s = lv_tensor_from_host(&val, x);
  free(x);
  if (s || t->axis != 1 || !lv_device_is_host(it->device)) return s;
  lv_qweight *q = lv_qweight_new(t->qtype, t->data, t->scales, rows, cols);
  if (!q) return pack_error(f, t);
  lv_var_set_quant(v, q);
  return NULL;
}

lv_status lv_instance_restore_model_file(lv_instance *m, const lv_model_file *f) {
  int n = 0;
  lv_saveable *items = lv_instance_saveables(m, &n);
  lv_status s = NULL;
  int on_device = 0; /* quantized weights made float32 for a device without int8 kernels */
  for (int i = 0; !s && i < n; i++) {
    const lv_mf_tensor *t = lv_model_file_tensor(f, items[i].name);
    if (!t) {
      s = lv_status_make(LV_ERR_NOT_FOUND, "model file %s has no variable %s, which the model has", f->path,
                         items[i].name);
    } else if (t->dtype != items[i].dtype || !lv_shape_eq(&t->shape, &items[i].shape)) {
      char a[96], b[96];
      lv_shape_str(&t->shape, a, sizeof a);
      lv_shape_str(&items[i].shape, b, sizeof b);
      s = lv_status_make(LV_ERR_INVALID, "model file %s: variable %s is %s %s, the model's is %s %s", f->path,
                         items[i].name, lv_dtype_names[t->dtype], a, lv_dtype_names[items[i].dtype], b);
    } else if (t->quantized) {
      s = restore_quantized(f, t, lv_varstore_get(m->vs, i), &items[i]);
      on_device += !lv_device_is_host(items[i].device);
    } else {
      lv_tensor v = lv_tensor_view(items[i].dtype, items[i].shape, items[i].data);
      v.device = items[i].device;
      s = lv_tensor_from_host(&v, t->data);
    }
  }
  int twins[LV_QTYPE_COUNT] = {0}, tables[LV_QTYPE_COUNT] = {0}, deferred = 0;
  for (int i = 0; !s && i < n; i++) {
    const lv_var *v = lv_varstore_get(m->vs, i);
    if (v->quant) (v->quant->axis ? twins : tables)[v->quant->type]++;
    deferred += v->deferred;
  }
  const bool twin_gemm = lv_qweights_enabled();
  for (int q = 0; q < LV_QTYPE_COUNT; q++) {
    if (twins[q])
      lv_info("model file %s: %d %s weight matrices, their matmuls on %s", f->path, twins[q], lv_qtype_names[q],
              twin_gemm ? lv_qtype_traits_of((lv_qtype)q)->engine() : "float32 GEMMs (LINGVOC_INT8=float)");
    if (tables[q]) lv_info("model file %s: %d %s gather tables", f->path, tables[q], lv_qtype_names[q]);
  }
  if (!s && on_device) {
    char dn[32];
    lv_info("model file %s: %d quantized weights dequantized to float32 on %s (the quantized kernels are CPU-only: "
            "the values are the quantized model's, the arithmetic float32)", f->path, on_device,
            lv_device_str(items[0].device, dn, sizeof dn));
  }
  if (deferred)
    lv_info("model file %s: %d quantized weights without float copies (floats only for an op that needs them)",
            f->path, deferred);
  if (!s && f->n_tensors != n)
    lv_warn("model file %s holds %d variables, the model %d: the others are not used", f->path, f->n_tensors, n);
  free(items);
  return s;
}
