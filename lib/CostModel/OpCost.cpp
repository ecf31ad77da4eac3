#include "loom/CostModel/OpCost.h"
