//===- ClusterSpecFuzzer.cpp - Fuzzing the cluster spec reader ------------===//
//
// Any bytes given to parseClusterSpec (loom-plan --cluster FILE, the
// passes' cluster= option) are a spec or an error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/ClusterSpec.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<loom::cost::ClusterSpec> spec =
      loom::cost::parseClusterSpec(text, "cluster.json");
  if (!spec)
    llvm::consumeError(spec.takeError());
  return 0;
}
