//===- JsonDepth.h - Bounding JSON nesting before parsing -------*- C++ -*-===//
//
// Both JSON parsers Loom uses (llvm::json in the tools, nlohmann in the
// runtime) recurse once per nested array or object, so a file of a hundred
// thousand '[' overflows the stack: a crash, or, when the overflow lands in
// malloc, a deadlock in the crash handler. Every reader first scans its text
// with findJsonTooDeep, which needs no recursion and no allocation. Plain
// C++ (no LLVM), so that the runtime's loader shares it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_JSONDEPTH_H
#define LOOM_JSONDEPTH_H

#include <cstddef>
#include <optional>
#include <string_view>

namespace loom {

/// Deeper than any file Loom reads or writes (plan.json nests 5 levels,
/// configs and safetensors headers 3), far shallower than a stack.
constexpr unsigned kMaxJsonDepth = 64;

/// The byte offset of the first '[' or '{' that opens level `maxDepth + 1`
/// (brackets inside strings do not count), or nullopt when `text` nests no
/// deeper than `maxDepth`. Malformed text is left to the parser.
inline std::optional<size_t>
findJsonTooDeep(std::string_view text, unsigned maxDepth = kMaxJsonDepth) {
  unsigned depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // The escaped character cannot end the string.
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

} // namespace loom

#endif // LOOM_JSONDEPTH_H
