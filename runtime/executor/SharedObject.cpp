//===- SharedObject.cpp - Checking program.so before dlopen ---------------===//
//
// dlopen trusts the ELF headers it reads: a program.so cut short (a full
// disk, an interrupted copy) is mapped as its program headers say, and the
// first access to a page past the end of the file raises SIGBUS inside the
// loader. So the headers are read here first, and every segment and header
// table must lie inside the file.
//
//===----------------------------------------------------------------------===//

#include "Artifact.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace loom::rt {

std::string checkSharedObject(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return "cannot read the file";
  const uint64_t size = uint64_t(in.tellg());
  Elf64_Ehdr header;
  if (size < sizeof header)
    return "truncated: " + std::to_string(size) +
           " bytes cannot hold an ELF header";
  in.seekg(0);
  in.read(reinterpret_cast<char *>(&header), sizeof header);
  if (!in || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return "not an ELF file";
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_type != ET_DYN)
    return "not a 64-bit little-endian ELF shared object";
  // Each table must lie inside the file; sizes are checked without
  // overflow (entries and counts are 16-bit).
  auto inside = [&](uint64_t offset, uint64_t bytes) {
    return offset <= size && bytes <= size - offset;
  };
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      !inside(header.e_phoff, uint64_t(header.e_phnum) * sizeof(Elf64_Phdr)))
    return "truncated or corrupt: the program headers lie outside the file";
  if (header.e_shnum != 0 &&
      (header.e_shentsize != sizeof(Elf64_Shdr) ||
       !inside(header.e_shoff, uint64_t(header.e_shnum) * sizeof(Elf64_Shdr))))
    return "truncated or corrupt: the section headers lie outside the file "
           "(" +
           std::to_string(size) + " bytes)";
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  in.seekg(std::streamoff(header.e_phoff));
  in.read(reinterpret_cast<char *>(segments.data()),
          std::streamsize(segments.size() * sizeof(Elf64_Phdr)));
  if (!in)
    return "cannot read the program headers";
  bool loads = false;
  for (const Elf64_Phdr &segment : segments) {
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC)
      continue;
    loads |= segment.p_type == PT_LOAD;
    if (!inside(segment.p_offset, segment.p_filesz))
      return "truncated: a segment ends at byte " +
             std::to_string(segment.p_offset + segment.p_filesz) + " of a " +
             std::to_string(size) + "-byte file";
  }
  if (!loads)
    return "corrupt: no loadable segment";
  return "";
}

} // namespace loom::rt
