//===- Linear.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
