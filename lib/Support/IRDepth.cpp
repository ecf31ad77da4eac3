//===- IRDepth.cpp - Bounding the nesting of MLIR text --------------------===//

#include "loom/Support/IRDepth.h"

#include "llvm/ADT/Twine.h"

namespace loom {

llvm::Error checkIRDepth(llvm::StringRef text, llvm::StringRef name,
                         unsigned maxDepth) {
  unsigned depth = 0, line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      lineStart = i + 1;
    } else if (c == '"') {
      // A string literal: its brackets are text. It ends at an unescaped
      // quote or, unterminated, where the parser will report it.
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      if (i < text.size() && text[i] == '\n')
        --i; // Count the line break on the next round.
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > maxDepth)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            (name + ":" + llvm::Twine(line) + ":" +
             llvm::Twine(i - lineStart + 1) + ": the IR nests deeper than " +
             llvm::Twine(maxDepth) +
             " brackets, more than a Loom module ever does")
                .str());
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return llvm::Error::success();
}

} // namespace loom
