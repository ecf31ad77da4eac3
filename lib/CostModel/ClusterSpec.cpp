//===- ClusterSpec.cpp - Cluster specs: JSON, presets ---------------------===//
// (being written)
#include "loom/CostModel/ClusterSpec.h"
