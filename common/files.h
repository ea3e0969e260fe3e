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
// Adds 022 to the process's umask: whatever the user's umask (even 000), nothing fanout or its ranks create
// (folders, sample files, CSVs, plots) is group- or world-writable. Called first in every executable.
void never_group_or_world_writable();

}  // namespace fanout
