// What a shared object exports, read from its file without loading it: dlopen runs a library's constructors, so
// a file that is no fanout plugin is refused before any code of it runs (docs/security.md).
#pragma once
#include <filesystem>
#include <string>

namespace fanout {

// "" when `file` is a 64-bit ELF shared object whose dynamic symbol table defines the function `symbol`; else why
// not ("not an ELF file", "exports no fanout_plugin_entry()", ...). Reads headers and the symbol tables only,
// every offset checked against the file's size.
std::string elf_exports_function(const std::filesystem::path& file, const std::string& symbol);

}  // namespace fanout
