// The kernels' shared thread count (see common.h).
#include "common.h"

namespace mindtune {
int g_threads = 0;
}

extern "C" void mindtune_set_threads(int threads) { mindtune::g_threads = threads; }
