//===- Norm.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
