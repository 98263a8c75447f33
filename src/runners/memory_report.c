#include "runners/memory_report.h"

#include <stdlib.h>
#include <string.h>

#include "core/variable.h"
#include "optim/optimizer.h"

/* A "VmHWM:" / "VmRSS:" line of /proc/self/status, in bytes (0 where there is none). */
static size_t proc_status_bytes(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0, n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, n)) {
      kb = (size_t)strtoull(line + n, NULL, 10);
      break;
    }
  fclose(f);
  return kb * 1024;
}

static void row(FILE *out, const char *name, size_t bytes, const char *note) {
  fprintf(out, "  %-30s %14zu bytes %10.2f MB%s%s\n", name, bytes, (double)bytes / 1e6, *note ? "  " : "", note);
}

void lv_memory_report_print(FILE *out, lv_instance *m, lv_learner *l, lv_ema *ema, const lv_batch *batch,
                            int64_t steps, bool free_in_backward) {
  size_t vars = 0, grads = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    const lv_var *v = lv_varstore_get(m->vs, i);
    vars += lv_tensor_nbytes(&v->value);
    if (v->grad.data) grads += lv_tensor_nbytes(&v->grad);
  }
  lv_optimizer *o = lv_learner_optimizer(l);
  size_t slots = 0, slot_host = 0;
  for (int i = 0; i < lv_optimizer_num_slot_vars(o); i++) {
    const char *name;
    float *data;
    int64_t n;
    lv_optimizer_slot_var(o, i, &name, &data, &n);
    slots += (size_t)n * sizeof(float);
    if (lv_optimizer_slot_host(o, i) != data) slot_host += (size_t)n * sizeof(float);
  }
  size_t accum = 0;
  for (int i = 0; i < lv_learner_num_accumulators(l); i++) {
    const char *name;
    int64_t n;
    lv_learner_accumulator(l, i, &name, &n);
    accum += 2 * (size_t)n * sizeof(float); /* the accumulator and its host copy */
  }
  size_t avg = 0;
  for (int i = 0; i < lv_ema_num_vars(ema); i++) {
    const char *name;
    float *data;
    int64_t n;
    lv_ema_shadow(ema, i, &name, &data, &n);
    avg += 2 * (size_t)n * sizeof(float); /* the shadow and its host copy */
  }
  size_t in_batch = 0;
  for (int i = 0; i < batch->map.n; i++) {
    const lv_tensor *t = lv_nmap_at(&batch->map, i)->t;
    if (t) in_batch += lv_tensor_nbytes(t);
  }
  lv_graph_mem_stats st;
  lv_graph_mem_stats_get(m->graph, true, &st);
  size_t kinds = 0;
  for (int k = 0; k < LV_GRAPH_MEM_COUNT; k++) kinds += st.at_peak[k];
  const size_t hwm = proc_status_bytes("VmHWM:"), rss = proc_status_bytes("VmRSS:");
  const size_t in_buffer = (size_t)lv_input_buffer_peak_bytes(m->input);
  const size_t accounted =
      vars + grads + slots + slot_host + accum + avg + st.arena_peak + st.meta_peak + in_batch + in_buffer;
  fprintf(out, "memory report: %s, %lld training step%s, free_in_backward %s\n", lv_params_str(m->cfg, "model"),
          (long long)steps, steps == 1 ? "" : "s", free_in_backward ? "on" : "off");
  row(out, "variables", vars, "");
  row(out, "variable gradients", grads, "one buffer, kept across steps");
  row(out, "optimizer slots", slots, "");
  row(out, "optimizer slot host copies", slot_host, slot_host ? "for checkpoints" : "none: the slots are host memory");
  row(out, "gradient accumulators", accum, "with their host copies");
  row(out, "moving averages", avg, "with their host copies");
  row(out, "input batch", in_batch, "the step's batch (host)");
  row(out, "input shuffle buffer peak", in_buffer, "training records (file_buffer_size, file_buffer_max_mb)");
  char note[160];
  snprintf(note, sizeof note, "worst of the steps: %d tape nodes", st.nodes);
  row(out, "step arena high-water", st.arena_peak, note);
  row(out, "arena allocator's own peak", st.arena_lifetime_peak, "since the start: the high-water above, counted by the arena");
  row(out, "  live at the peak", st.live_peak, "sum of the four below");
  for (int k = 0; k < LV_GRAPH_MEM_COUNT; k++) {
    char name[64];
    snprintf(name, sizeof name, "    %s", lv_graph_mem_kind_names[k]);
    snprintf(note, sizeof note, "%.2f MB allocated in the step", (double)st.allocated[k] / 1e6);
    row(out, name, st.at_peak[k], note);
  }
  /* The forward memory at the peak by op, largest first (the first 8). */
  bool shown[LV_GRAPH_MEM_OPS] = {false};
  for (int r = 0; r < 8; r++) {
    int best = -1;
    for (int i = 0; i < LV_GRAPH_MEM_OPS - 1; i++)
      if (!shown[i] && st.peak_by_op[i] && (best < 0 || st.peak_by_op[i] > st.peak_by_op[best])) best = i;
    if (best < 0) break;
    shown[best] = true;
    char name[64];
    snprintf(name, sizeof name, "      of it by %s", lv_graph_mem_op_name(best));
    row(out, name, st.peak_by_op[best], "forward memory this op made, live at the peak");
  }
  row(out, "  gaps between freed pieces", st.arena_peak - st.live_peak, "high-water minus live peak");
  row(out, "  given back", st.released, "during the step");
  row(out, "  given back in forward", st.released_forward, "at the end of layers' forward scopes");
  row(out, "  reused from what was given", st.reused, "");
  row(out, "step arena blocks held", st.arena_reserved, "untouched room is not resident");
  row(out, "tensor headers and tape", st.meta_peak, "host");
  row(out, "accounted", accounted, "variables to headers, blocks held not counted");
  row(out, "process peak RSS (VmHWM)", hwm, "");
  row(out, "process RSS now (VmRSS)", rss, "");
  row(out, "peak RSS not accounted", hwm > accounted ? hwm - accounted : 0,
      "code, libraries, thread stacks, OpenBLAS buffers, input queues, mapped record files, malloc");
  fflush(out);
  LV_ASSERT(kinds == st.live_peak);
}

void lv_memory_summary(const lv_instance *m, char *buf, size_t n) {
  size_t vars = 0;
  for (int i = 0; i < lv_varstore_count(m->vs); i++) {
    const lv_var *v = lv_varstore_get(m->vs, i);
    if (v->value.data) vars += lv_tensor_nbytes(&v->value);
  }
  lv_graph_mem_stats st;
  lv_graph_mem_stats_get(m->graph, true, &st);
  const size_t arena = st.arena_lifetime_peak > st.arena_peak ? st.arena_lifetime_peak : st.arena_peak;
  const size_t in_buffer = m->input ? (size_t)lv_input_buffer_peak_bytes(m->input) : 0;
  const size_t hwm = proc_status_bytes("VmHWM:"), known = vars + arena + in_buffer;
  snprintf(buf, n,
           "peak RSS %.1f MB: weights %.1f MB, step arena %.1f MB (worst batch), input buffer %.1f MB, other %.1f MB "
           "(code, libraries, BLAS and thread buffers, malloc)",
           (double)hwm / 1e6, (double)vars / 1e6, (double)arena / 1e6, (double)in_buffer / 1e6,
           hwm > known ? (double)(hwm - known) / 1e6 : 0.0);
}
