//===- Collectives.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
