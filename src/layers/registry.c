#include <pthread.h>

#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/layer.h"
#include "layers/pooling.h"
#include "layers/projection.h"
#include "layers/softmax.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void register_all(void) {
#define X(name, ctor) lv_registry_add(name, ctor);
#include "layers/layers.def"
#undef X
}

void lv_layers_register_all(void) { pthread_once(&g_once, register_all); }
