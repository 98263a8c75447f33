/* Device backends for code outside the op front end (the variable store, input
 * pipelines, checkpoint loading): memory, copies and sync per device. Ops dispatch on
 * their inputs' device through the same table; there is no global device mode. */
#ifndef LV_CORE_BACKEND_H
#define LV_CORE_BACKEND_H

#include "core/tensor.h"
#include "kernels/kernels.h"

/* NULL when this build has no backend for d (CUDA without CUDA=1). */
const lv_backend *lv_backend_get(lv_device d);

#endif
