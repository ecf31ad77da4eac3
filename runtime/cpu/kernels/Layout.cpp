//===- Layout.cpp - CPU kernels -------------------------------------------===//

#include "KernelArgs.h"
