//===- CpuKernelNeuralTest.cpp ---------------------------------------------------------===//

#include "CpuKernelTestSupport.h"

#include <gtest/gtest.h>
