#include "loom/CostModel/Collectives.h"
