// fanout-build-model: writes the SmartSim-Scaling inference benchmark's inputs without Python:
//   fanout-build-model --out DIR [--device CPU|GPU] [--seed N] [--force]
// DIR/resnet50.<cpu|gpu>.pt    TorchScript ResNet-50 with seeded random weights (kept if present, as
//                              SmartSim-Scaling's rebuild_model does, unless --force)
// DIR/data_processing_script.txt  the preprocessing script's TorchScript source (always rewritten: it is tiny)
// Both are written to a temporary name and renamed, so a concurrent reader never sees half a file.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "fanout_files.hpp"
#include "resnet50.h"

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double mib(const fs::path& p) { return double(fs::file_size(p)) / (1024.0 * 1024.0); }

void write_text(const fs::path& path, const std::string& text) { fanout_sdk::write_file_atomic(path.string(), text); }

void build_model(const fs::path& path, const std::string& device, uint64_t seed, bool force) {
  if (fs::exists(path) && !force) {
    std::printf("kept %s (exists; --force rebuilds it)\n", path.c_str());
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t params = smartsim_model::write_resnet50(path.string(), device, seed);
  std::printf("wrote %s: %lld parameters, %.1f MiB, %.2f s\n", path.c_str(), static_cast<long long>(params), mib(path),
              seconds_since(start));
}

void build_script(const fs::path& path) {
  const auto start = std::chrono::steady_clock::now();
  write_text(path, smartsim_model::preprocessing_script());
  std::printf("wrote %s: TorchScript source, %ju bytes (%.3f MiB), %.2f s\n", path.c_str(), std::uintmax_t(fs::file_size(path)),
              mib(path), seconds_since(start));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fanout-build-model: write SmartSim-Scaling's ResNet-50 (seeded random weights) and preprocessing script"};
  std::string out;
  std::string device = "CPU";
  uint64_t seed = 0;
  bool force = false;
  app.add_option("--out", out, "directory to write resnet50.<cpu|gpu>.pt and data_processing_script.txt into")->required();
  app.add_option("--device", device, "where the model's parameters live")
      ->capture_default_str()
      ->transform(CLI::IsMember({"CPU", "GPU"}, CLI::ignore_case));
  app.add_option("--seed", seed, "seed of the weights' generator (same seed, same weights)")->capture_default_str();
  app.add_flag("--force", force, "rebuild the model even if the file exists");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors (CLI11 names the flag, e.g. "--device: TPU not in {CPU,GPU}") exit 2 like fanout's own.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    const fs::path dir(out);
    fs::create_directories(dir);
    const std::string lower = device == "GPU" ? "gpu" : "cpu";
    build_model(dir / ("resnet50." + lower + ".pt"), device, seed, force);
    build_script(dir / "data_processing_script.txt");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fanout-build-model: error: %s\n", e.what());
    return 1;
  }
}
