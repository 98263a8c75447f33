/* Model files (io/model_file.h) from checkpoints and models from model files: Lingvo's
 * write_inference_graph for lingvoc. Export restores a checkpoint as the decoder does
 * (the moving averages for the variables that have them, Lingvo's eval theta) and writes
 * the model's variables (no optimizer slots: an instance has none), the resolved params
 * with every input file pattern cleared, and the files the params name (the tokenizer's
 * vocabulary or SentencePiece model) as assets, their params replaced by the base name.
 * Loading writes the assets to a private directory, rebuilds the params from the text
 * (the registry instantiates every cls line, as for an inspect_params dump), points the
 * asset params there, applies the user's overrides, and restores the variables from the
 * file, checking that every one is there with its shape and dtype. */
#ifndef LV_RUNNERS_MODEL_EXPORT_H
#define LV_RUNNERS_MODEL_EXPORT_H

#include <stdint.h>

#include "base/path.h"
#include "io/model_file.h"
#include "params/params.h"
#include "runners/instance.h"

typedef struct lv_export_info {
  char checkpoint[LV_PATH_MAX]; /* the prefix restored */
  int64_t step;
  int n_tensors, n_averages, n_assets;
  int n_quantized; /* tensors written quantized */
  /* Of those, weights a quantization domain fake-quantizes (QAT), and how many of their
   * channels were stored on the domain's grid (the others rescaled). */
  int n_qat;
  int64_t n_qat_grid_channels;
  uint64_t bytes; /* the file's size */
} lv_export_info;

/* Writes cfg's model (built for the decoder job: the dataset's tokenizer) from checkpoint
 * (a prefix or a directory's latest; NULL or "": the latest in <cluster.logdir>/train)
 * to out_path. A shallow-fusion LM that cfg names by experiment is exported too and stored
 * inside, as task.decoder.fusion.lm_model_file's asset (a model file in the model file).
 * quantize: NULL or "" keeps float32; a type name (kernels/qweight.h: "int8") quantizes
 * every rank-2 float32 variable, symmetric per channel: per output column for a
 * matmul's weight, per row for a table read by gathers (lv_var.lp_looked_up_rows).
 * A weight that a quantization domain fake-quantizes (quantization-aware training,
 * layers/qdomain.h; lv_var.qdomain) is first given the values its domain's QWeight gives
 * at inference, at the checkpoint's step: SymmetricScheduledClipQDomain's clip to the
 * learned cap and fake quantization to its end range, PassiveAsymQDomain's fake
 * quantization to [min(w), max(w)]. Every output channel whose values lie on the
 * domain's grid within int8's range is stored as the grid's levels with the grid's step
 * as its scale (the one level past [-127, 127] clamped to it), so the int8 model
 * multiplies the very weights QAT evaluated: all of them for the scheduled domain (its
 * (-cap, cap 127/128) has step cap/128), the passive domain's where a channel stays
 * within 127 steps of zero (its grid's zero point sits where [min(w), max(w)] puts it);
 * the other channels are quantized per channel from those values as above. At
 * inference such a weight skips its QWeight (lv_qlayer_weight). Activations: the model
 * file keeps the domains and PassiveAsymQDomain's learned ranges (q/<act>_min|max), and
 * the decoder fake-quantizes the tracked activations with them as the evaler does; the
 * int8 GEMMs then quantize their inputs per row on the fly (a finer scale than a range
 * fixed for the whole tensor). */
lv_status lv_export_model_file(const lv_params *cfg, const char *checkpoint, const char *quantize,
                               const char *out_path, lv_export_info *info);

/* Writes f's assets into a new private directory (dir, LV_PATH_MAX bytes) under $TMPDIR. */
lv_status lv_model_file_assets_dir(const lv_model_file *f, char *dir, size_t n);
/* Removes such a directory and its files. */
void lv_model_file_assets_remove(const char *dir);
/* f's frozen params: its text, the asset params in assets_dir, then override (or
 * override_file), flag_params (params lines, as lv_model_options's) and num_threads
 * (> 0: cluster.num_threads). */
lv_status lv_model_file_params(const lv_model_file *f, const char *assets_dir, const char *override,
                               const char *override_file, const char *flag_params, int64_t num_threads,
                               lv_params **out);
/* Restores every variable of m from f. A quantized tensor restores its dequantized
 * values, and on the host a matmul weight (axis 1) also gets its packed twin
 * (lv_var_set_quant), which forward-only matmuls then use. */
lv_status lv_instance_restore_model_file(lv_instance *m, const lv_model_file *f);

#endif
