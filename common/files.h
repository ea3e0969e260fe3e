// File helpers: atomic writes (write, fsync, rename) so that a reader never sees half a file.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace fanout {

void write_file_atomic(const std::filesystem::path& path, std::string_view content, int mode = 0644);
std::string read_file(const std::filesystem::path& path);
// Creates a directory (and parents) that is not world-writable (0755 regardless of umask for the leaf).
void make_private_dirs(const std::filesystem::path& dir);

}  // namespace fanout
