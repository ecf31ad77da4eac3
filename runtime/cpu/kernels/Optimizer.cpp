//===- Optimizer.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
