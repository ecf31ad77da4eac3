#include "loom/Foo/Foo.h"
