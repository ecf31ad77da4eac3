//===- Elementwise.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
