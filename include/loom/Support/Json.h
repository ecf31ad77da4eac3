//===- Json.h - Parsing JSON with bounded nesting ---------------*- C++ -*-===//
//
// Every JSON reader of the tools parses through parseJson, so that a file
// nesting a hundred thousand arrays is an error, not a stack overflow in
// llvm::json's recursive parser (loom/JsonDepth.h, the runtime's).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_JSON_H
#define LOOM_SUPPORT_JSON_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace loom {

/// llvm::json::parse, after checking that `text` nests at most
/// kMaxJsonDepth levels; an object with a key twice is an error (llvm::json
/// would keep the last silently). The error does not name the file:
/// callers say which file it was.
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text);

} // namespace loom

#endif // LOOM_SUPPORT_JSON_H
