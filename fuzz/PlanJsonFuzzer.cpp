//===- PlanJsonFuzzer.cpp - Fuzzing the artifact loader's plan.json -------===//
//
// Any bytes given as an artifact's plan.json are a plan whose every field
// has its type and range (shapes against the grid, split axes on it,
// workspace sizes bounded) or an error, never a crash; the session code
// after the loader trusts what passes.
//
//===----------------------------------------------------------------------===//

#include "Artifact.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  loom::rt::Artifact artifact;
  (void)artifact.parsePlanText("plan.json", text, "cpu");
  return 0;
}
