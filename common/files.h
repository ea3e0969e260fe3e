// File helpers: atomic writes (write, fsync, rename) so that a reader never sees half a file.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace fanout {

// Durable: fsync before the rename. Deferred: no fsync of its own; the caller makes a batch durable with one
// sync_filesystem() (a thousand run folders laid out with three fsyncs each cost the driver more CPU than
// everything else it does before submitting).
enum class Durability { Now, Deferred };
void write_file_atomic(const std::filesystem::path& path, std::string_view content, int mode = 0644,
                       Durability durability = Durability::Now);
// A file that must not exist yet, written in place: no file aside, no rename (two renames were 3 % of the driver's
// CPU a run). Only for what nothing reads before a later sync_filesystem() (a run folder being laid out before its
// first submission): a driver killed while writing leaves it cut short, which its readers take as never written.
void write_new_file(const std::filesystem::path& path, std::string_view content, int mode = 0644);
// `content` added at the end of an existing file in one write (O_APPEND): no file aside, no rename, so no inode made
// and none freed. A write that fails is cut back off the file; a link or anything but a regular file is refused. Not
// atomic for a concurrent reader the way a rename is: only for what a reader may find cut short and take as not yet
// written.
void append_to_file(const std::filesystem::path& path, std::string_view content, Durability durability = Durability::Now);
// Everything written on the filesystem holding `path` reaches the disk (syncfs): one journal commit for a batch.
void sync_filesystem(const std::filesystem::path& path);
std::string read_file(const std::filesystem::path& path);
// A folder's entries but "." and "..", each with the type the folder lists it with (DT_REG, DT_DIR, ...; DT_UNKNOWN
// where the filesystem does not say), read with one descriptor and no stat of the folder or of an entry
// (std::filesystem's iterator made five system calls more for a run's samples/ folder). Empty, with `error`
// set, when the folder cannot be opened or read.
struct FolderEntry {
  std::string name;
  unsigned char type;
};
std::vector<FolderEntry> list_folder(const std::filesystem::path& dir, std::error_code& error);
// One folder name that stays where it is put: 1 to 255 bytes, no '/', not "." or "..", no control character.
bool plain_folder_name(std::string_view name);
// An input a user or another program left (run.toml, a timing file): a regular file of at most max_bytes, else a
// UserError naming it. A FIFO is not opened for reading (that would hang), /dev/zero or a 2 GB sparse file is not
// read whole to find out.
std::string read_input_file(const std::filesystem::path& path, size_t max_bytes);
// Creates a directory (and parents) that is not world-writable (0755 regardless of umask for the leaf; a parent's
// default ACL or setgid bit applies to it as to any new folder).
void make_private_dirs(const std::filesystem::path& dir);
// Adds 022 to the process's umask: whatever the user's umask (even 000), nothing fanout or its ranks create
// (folders, sample files, CSVs, plots) is group- or world-writable. Called first in every executable.
void never_group_or_world_writable();

}  // namespace fanout
