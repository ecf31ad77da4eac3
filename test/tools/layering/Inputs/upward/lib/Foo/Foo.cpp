#include "dialects/Baz/Baz.h"
#include "passes/Bar/Passes.h"
