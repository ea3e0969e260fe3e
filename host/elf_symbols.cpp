#include "host/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace fanout {

namespace {

constexpr uint64_t kMaxTableBytes = uint64_t(256) << 20;  // a symbol or string table larger than this is no plugin's

class File {
 public:
  explicit File(const std::filesystem::path& p) : fd_(::open(p.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = uint64_t(st.st_size), regular_ = true;
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0 && regular_; }
  // Reads n bytes at off, false when they are not all inside the file.
  bool read(uint64_t off, void* out, uint64_t n) const {
    if (off > size_ || n > size_ - off) return false;
    return ::pread(fd_, out, n, off_t(off)) == ssize_t(n);
  }
  std::vector<char> bytes(uint64_t off, uint64_t n) const {
    std::vector<char> v;
    if (n > kMaxTableBytes) return v;
    v.resize(n);
    if (!read(off, v.data(), n)) v.clear();
    return v;
  }

 private:
  int fd_;
  uint64_t size_ = 0;
  bool regular_ = false;
};

}  // namespace

std::string elf_exports_function(const std::filesystem::path& file, const std::string& symbol) {
  File f(file);
  if (!f.ok()) return "it is not a regular file that can be read";
  Elf64_Ehdr eh{};
  if (!f.read(0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "it is not an ELF file";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) return "it is not a 64-bit little-endian ELF file";
  if (eh.e_type != ET_DYN) return "it is an ELF file but not a shared object";
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0) return "its section headers cannot be read";
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!f.read(eh.e_shoff, sections.data(), uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr))) return "its section headers lie outside the file";
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type != SHT_DYNSYM) continue;
    if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= sections.size()) return "its dynamic symbol table is malformed";
    const std::vector<char> syms = f.bytes(s.sh_offset, s.sh_size);
    const std::vector<char> names = f.bytes(sections[s.sh_link].sh_offset, sections[s.sh_link].sh_size);
    if ((s.sh_size && syms.empty()) || (sections[s.sh_link].sh_size && names.empty())) return "its dynamic symbol table lies outside the file";
    for (size_t at = 0; at + sizeof(Elf64_Sym) <= syms.size(); at += sizeof(Elf64_Sym)) {
      Elf64_Sym sym{};
      std::memcpy(&sym, syms.data() + at, sizeof sym);
      if (sym.st_name >= names.size() || sym.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      const char* name = names.data() + sym.st_name;
      const size_t len = strnlen(name, names.size() - sym.st_name);
      if (len == symbol.size() && std::memcmp(name, symbol.data(), len) == 0) return "";
    }
  }
  return "it exports no " + symbol + "()";
}

}  // namespace fanout
