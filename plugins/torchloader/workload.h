// The torchloader workload file: one training application per CSV row, read by the Submitter.
//
// Header row (any column order, each column exactly once, no other columns):
//   arch,depth,batch,workers,output_folder,master,port,arrival_time,cuda_device,
//   start_iter,start_epoch,end_iter,end_epoch,node_size
// Blanks around fields are ignored; blank lines are skipped; '\r' line ends are accepted.
// Fields may be double-quoted ("...", the quotes are dropped, "" inside stands for one quote); a
// bracketed list [...] is one field even when it has commas inside. cuda_device is one list of device
// indexes per node, written in any of the seed's spellings:
//   ["0 1" "0 1"]   ["0,1","0,1"]   ["0 1","0 1"]   [[0,1],[0,1]]   -> {{0,1},{0,1}}
//   "0 1"  (a bare group: one node)                                 -> {{0,1}}
//   []  or an empty field                                           -> {} (no explicit devices)
// Errors throw std::runtime_error "<source_name>:<line>: <column>: <what>", e.g.
//   "workload.csv:3: depth: 'ten' is not an integer".
// Checks: arch is resnet|vgg|googlenet; batch, workers, node_size, end_iter > 0; arrival_time >= 0
// (finite); device indexes >= 0; a non-empty cuda_device has node_size nodes, none of them empty.
// Other integers (depth, port, start_*/end_epoch) are only checked to be integers.
#pragma once
#include <string>
#include <vector>

namespace torchloader {

struct AppSpec {
  std::string arch;           // resnet | vgg | googlenet
  int depth = 0;              // layer count of the model (resnet 18/50, vgg 11/16, ...)
  int batch = 0;              // overall batch across all devices of all nodes
  int workers = 0;            // overall data-loading workers across all devices of all nodes
  std::string output_folder;  // result folder (quotes removed)
  std::string master;         // host of the PyTorch master process
  int port = 0;               // port of the PyTorch master process
  double arrival_time = 0;    // seconds after the workload starts
  std::vector<std::vector<int>> cuda_device;  // device indexes, one list per node (may be empty)
  int start_iter = 0, start_epoch = 0, end_iter = 0, end_epoch = 0, node_size = 0;
  int line = 0;  // 1-based line of the row in the workload file (the header is line 1)
};

// Parses a whole workload file's text. source_name is only used in error messages.
std::vector<AppSpec> parse_workload(const std::string& text, const std::string& source_name);

// Total iterations an application runs:
//   end_iter * max(1, end_epoch - start_epoch + 1) - start_iter
// i.e. end_iter is the iterations per epoch, epochs start_epoch..end_epoch inclusive are run (at least one),
// and start_iter iterations of the first epoch are already done (resumed from a checkpoint). Never below 0.
// The seed's rows (start 0/1, end 500/1) give 500.
int total_iterations(const AppSpec& app);

}  // namespace torchloader
