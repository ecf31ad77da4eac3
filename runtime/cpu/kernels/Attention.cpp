//===- Attention.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
