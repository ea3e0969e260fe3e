// torchloader's pure model pieces: the workload CSV, the throughput prediction model (TPM) and the worker
// allocation algorithm (WAA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "plugins/torchloader/tpm.h"
#include "plugins/torchloader/waa.h"
#include "plugins/torchloader/workload.h"
#include "tests/expect_throw.h"

using namespace torchloader;

namespace {

const char* kHeader =
    "arch,depth,batch,workers,output_folder,master,port,arrival_time,cuda_device,start_iter,start_epoch,end_iter,"
    "end_epoch,node_size\n";

// The seed's example, verbatim (note the double blank before the googlenet arrival time).
const std::string kSeed = std::string(kHeader) +
    "resnet, 10, 512, 16, \"test-48worker-2node-mod3\",d3093, 12448, 1, [\"0 1\" \"0 1\"], 0, 1, 500, 1, 2\n"
    "vgg, 11, 512, 16, \"test-48worker-2node-mod3\",d3093, 23448, 1, [\"1 2\" \"1 2\"], 0, 1, 500, 1, 2\n"
    "googlenet, 1, 512, 16, \"test-48worker-2node-mod3\",d3093, 58448,  1, [\"0 2\" \"0 2\"], 0, 1, 500, 1, 2\n";

// The message of the std::runtime_error that parsing text throws ("" when none is thrown).
std::string parse_error(const std::string& text) {
  try {
    parse_workload(text, "workload.csv");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// A valid row with one field replaced (fields in header order).
std::string row_with(int field, const std::string& value) {
  std::vector<std::string> f = {"resnet", "50", "256", "8", "out", "n1", "1234", "0", "[\"0 1\"]", "0", "1",
                                "100", "1", "1"};
  f[field] = value;
  std::string s;
  for (size_t i = 0; i < f.size(); ++i) s += (i ? "," : "") + f[i];
  return s + "\n";
}

// Standard normal from a fixed-seed mt19937 (Box-Muller; the engine's output is fully specified).
struct Gauss {
  std::mt19937 rng{12345};
  double uniform() { return (static_cast<double>(rng()) + 0.5) / 4294967296.0; }
  double operator()() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform()); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------- workload

TEST(TorchloaderWorkload, ParsesTheSeedExample) {
  auto apps = parse_workload(kSeed, "workload.csv");
  ASSERT_EQ(apps.size(), 3u);
  const AppSpec& r = apps[0];
  EXPECT_EQ(r.arch, "resnet");
  EXPECT_EQ(r.depth, 10);
  EXPECT_EQ(r.batch, 512);
  EXPECT_EQ(r.workers, 16);
  EXPECT_EQ(r.output_folder, "test-48worker-2node-mod3");
  EXPECT_EQ(r.master, "d3093");
  EXPECT_EQ(r.port, 12448);
  EXPECT_DOUBLE_EQ(r.arrival_time, 1.0);
  EXPECT_EQ(r.cuda_device, (std::vector<std::vector<int>>{{0, 1}, {0, 1}}));
  EXPECT_EQ(r.start_iter, 0);
  EXPECT_EQ(r.start_epoch, 1);
  EXPECT_EQ(r.end_iter, 500);
  EXPECT_EQ(r.end_epoch, 1);
  EXPECT_EQ(r.node_size, 2);
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(total_iterations(r), 500);

  EXPECT_EQ(apps[1].arch, "vgg");
  EXPECT_EQ(apps[1].depth, 11);
  EXPECT_EQ(apps[1].port, 23448);
  EXPECT_EQ(apps[1].cuda_device, (std::vector<std::vector<int>>{{1, 2}, {1, 2}}));
  EXPECT_EQ(apps[1].line, 3);
  EXPECT_EQ(apps[2].arch, "googlenet");
  EXPECT_EQ(apps[2].depth, 1);
  EXPECT_EQ(apps[2].port, 58448);
  EXPECT_DOUBLE_EQ(apps[2].arrival_time, 1.0);
  EXPECT_EQ(apps[2].cuda_device, (std::vector<std::vector<int>>{{0, 2}, {0, 2}}));
  EXPECT_EQ(apps[2].output_folder, "test-48worker-2node-mod3");
  EXPECT_EQ(apps[2].line, 4);
}

TEST(TorchloaderWorkload, AcceptsOtherDeviceSpellingsColumnOrdersAndBlanks) {
  std::string text =
      "node_size , cuda_device,arch,depth,batch,workers,output_folder,master,port,arrival_time,start_iter,"
      "start_epoch,end_iter,end_epoch\r\n"
      "2, [\"0,1\",\"0,1\"], vgg, 16, 128, 4, out, h, 1, 2.5, 0, 1, 10, 1\r\n"
      "\n"
      "   \n"
      "1, [], resnet, 18, 64, 2, \"a,b\", h, 2, 0, 0, 1, 10, 1\r\n"
      "1, \"0 1\", googlenet, 1, 64, 2, out, h, 3, 7, 5, 1, 10, 3\n"
      "1, [[3,4]], googlenet, 1, 64, 2, out, h, 3, 7, 0, 1, 10, 1\n"
      "1, ,resnet, 18, 64, 2, out, h, 4, 0, 0, 1, 10, 1";  // no final newline, empty cuda_device
  auto apps = parse_workload(text, "w.csv");
  ASSERT_EQ(apps.size(), 5u);
  EXPECT_EQ(apps[0].arch, "vgg");
  EXPECT_EQ(apps[0].cuda_device, (std::vector<std::vector<int>>{{0, 1}, {0, 1}}));
  EXPECT_DOUBLE_EQ(apps[0].arrival_time, 2.5);
  EXPECT_EQ(apps[0].line, 2);
  EXPECT_TRUE(apps[1].cuda_device.empty());
  EXPECT_EQ(apps[1].output_folder, "a,b");
  EXPECT_EQ(apps[1].line, 5);
  EXPECT_EQ(apps[2].cuda_device, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(total_iterations(apps[2]), 10 * 3 - 5);
  EXPECT_EQ(apps[3].cuda_device, (std::vector<std::vector<int>>{{3, 4}}));
  EXPECT_TRUE(apps[4].cuda_device.empty());
  EXPECT_EQ(apps[4].port, 4);
}

TEST(TorchloaderWorkload, HeaderOnlyIsAnEmptyWorkload) {
  EXPECT_TRUE(parse_workload(kHeader, "w.csv").empty());
  EXPECT_NE(parse_error("").find("workload.csv:1: header:"), std::string::npos);
}

TEST(TorchloaderWorkload, ErrorsNameTheFileLineAndColumn) {
  std::string good = row_with(0, "resnet");
  ASSERT_EQ(parse_error(kHeader + good), "");

  // The issue's example: a non-integer depth on line 3.
  EXPECT_EQ(parse_error(kHeader + good + row_with(1, "ten")), "workload.csv:3: depth: 'ten' is not an integer");

  struct Case {
    int field;
    std::string value, expected;
  };
  std::vector<Case> cases = {
      {0, "alexnet", "workload.csv:2: arch: 'alexnet' is not one of resnet, vgg, googlenet"},
      {2, "0", "workload.csv:2: batch: must be positive, got 0"},
      {2, "12.5", "workload.csv:2: batch: '12.5' is not an integer"},
      {3, "-1", "workload.csv:2: workers: must be positive, got -1"},
      {6, "http", "workload.csv:2: port: 'http' is not an integer"},
      {7, "-3", "workload.csv:2: arrival_time: must not be negative, got -3"},
      {7, "soon", "workload.csv:2: arrival_time: 'soon' is not a number"},
      {8, "[\"0 x\"]", "workload.csv:2: cuda_device: 'x' is not an integer"},
      {8, "[\"0 1\" \"0 1\"]", "workload.csv:2: cuda_device: lists 2 node(s) but node_size is 1"},
      {9, "", "workload.csv:2: start_iter: '' is not an integer"},
      {11, "0", "workload.csv:2: end_iter: must be positive, got 0"},
      {13, "0", "workload.csv:2: node_size: must be positive, got 0"},
  };
  for (const Case& c : cases) EXPECT_EQ(parse_error(kHeader + row_with(c.field, c.value)), c.expected) << c.value;

  // Header problems are reported on the header's line with the column named.
  std::string no_node_size = "arch,depth,batch,workers,output_folder,master,port,arrival_time,cuda_device,"
                             "start_iter,start_epoch,end_iter,end_epoch\n";
  EXPECT_EQ(parse_error(no_node_size), "workload.csv:1: header: missing column 'node_size'");
  EXPECT_EQ(parse_error("\n" + std::string(kHeader).insert(0, "archh,")),
            "workload.csv:2: header: unknown column 'archh'");
  EXPECT_EQ(parse_error(std::string(kHeader).insert(0, "port,")), "workload.csv:1: header: duplicate column 'port'");

  // Wrong field count (one field missing), unterminated quote and bracket.
  std::string short_row = row_with(0, "resnet");
  short_row.erase(0, short_row.find(',') + 1);
  EXPECT_EQ(parse_error(kHeader + good + good + short_row), "workload.csv:4: expected 14 fields, got 13");
  EXPECT_NE(parse_error(kHeader + row_with(4, "\"out")).find("workload.csv:2: unterminated quote in column 5"),
            std::string::npos);
  EXPECT_NE(parse_error(kHeader + row_with(8, "[\"0 1\"")).find("workload.csv:2: unterminated '[' in column 9"),
            std::string::npos);
}

TEST(TorchloaderWorkload, TotalIterations) {
  AppSpec a;
  a.end_iter = 100;
  a.start_epoch = 1;
  a.end_epoch = 3;
  a.start_iter = 40;
  EXPECT_EQ(total_iterations(a), 260);  // epochs 1..3 of 100, 40 already done
  a.end_epoch = 0;                       // fewer epochs than the start: still one epoch
  EXPECT_EQ(total_iterations(a), 60);
}

// ---------------------------------------------------------------------------------------------- TPM

TEST(TorchloaderTpm, FitLoaderRecoversExactModel) {
  LoaderModel truth{0.02, 0.001};
  std::vector<std::pair<int, double>> obs;
  for (int w : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32}) obs.emplace_back(w, truth.samples_per_second(w));
  LoaderModel m = fit_loader(obs);
  EXPECT_NEAR(m.a, 0.02, 1e-12);
  EXPECT_NEAR(m.b, 0.001, 1e-12);
  EXPECT_NEAR(m.seconds_per_sample(4), 0.006, 1e-12);
  EXPECT_NEAR(m.samples_per_second(4), 1.0 / 0.006, 1e-6);
}

TEST(TorchloaderTpm, FitLoaderWithinTwoPercentUnderOnePercentNoise) {
  LoaderModel truth{0.02, 0.001};
  Gauss g;
  std::vector<std::pair<int, double>> obs;
  for (int rep = 0; rep < 16; ++rep)
    for (int w = 1; w <= 32; ++w) obs.emplace_back(w, truth.samples_per_second(w) * (1 + 0.01 * g()));
  LoaderModel m = fit_loader(obs);
  EXPECT_NEAR(m.a, 0.02, 0.02 * 0.02);
  EXPECT_NEAR(m.b, 0.001, 0.001 * 0.02);
}

// Two workers measured at more than twice one worker's rate (noise) would fit a negative serial part, which no
// loader has (and an emulated loader cannot wait): the fit goes through the origin instead, b = 0.
// Issue 42: loaders that do not follow the model WAA plans with. Each coefficient is off by a draw within
// +-error, fixed by (seed, application): the same on every node and after every restart.
TEST(TorchloaderTpm, LoaderWithErrorStaysWithinTheErrorAndIsReproducible) {
  const LoaderModel model{0.02, 0.001};
  EXPECT_EQ(loader_with_error(model, 0, 1, 0).a, model.a);
  EXPECT_EQ(loader_with_error(model, 0, 1, 0).b, model.b);
  double lowest = 1, highest = -1;
  for (int app = 0; app < 200; ++app) {
    const LoaderModel r = loader_with_error(model, 0.4, 7, app);
    for (double e : {r.a / model.a - 1, r.b / model.b - 1}) {
      EXPECT_LE(std::abs(e), 0.4 + 1e-12) << "app " << app;
      lowest = std::min(lowest, e), highest = std::max(highest, e);
    }
    EXPECT_EQ(loader_with_error(model, 0.4, 7, app).a, r.a) << "reproducible";
  }
  EXPECT_LT(lowest, -0.3) << "the draws cover the range";
  EXPECT_GT(highest, 0.3);
  EXPECT_NE(loader_with_error(model, 0.4, 7, 0).a, loader_with_error(model, 0.4, 8, 0).a) << "the seed matters";
}

TEST(TorchloaderTpm, FitLoaderNeverGivesANegativeSerialPart) {
  LoaderModel m = fit_loader({{1, 1000.0}, {2, 2100.0}});
  EXPECT_EQ(m.b, 0.0);
  // Least squares of 1/thr = a/w through the origin: a = sum(x y) / sum(x x), x = 1/w, y = 1/thr.
  EXPECT_NEAR(m.a, (1.0 / 1000 + 0.5 / 2100) / (1.0 + 0.25), 1e-15);
}

// More workers measured slower (a loaded machine) would fit a negative a: the model then does not scale at all.
TEST(TorchloaderTpm, FitLoaderNeverGivesANegativeParallelPart) {
  LoaderModel m = fit_loader({{1, 1000.0}, {2, 900.0}});
  EXPECT_EQ(m.a, 0.0);
  EXPECT_NEAR(m.b, (1.0 / 1000 + 1.0 / 900) / 2, 1e-15);
}

TEST(TorchloaderTpm, FitLoaderRefusesBadInput) {
  EXPECT_THROW_WITH(fit_loader({}), std::runtime_error, "fit_loader: need observations at >= 2 distinct worker counts, got 0");
  EXPECT_THROW_WITH(fit_loader({{4, 100.0}, {4, 110.0}}), std::runtime_error,  // one worker count
                    "fit_loader: need observations at >= 2 distinct worker counts, got 1");
  EXPECT_THROW_WITH(fit_loader({{0, 100.0}, {4, 110.0}}), std::runtime_error, "fit_loader: workers must be >= 1, got 0");
  EXPECT_THROW_WITH(fit_loader({{1, 100.0}, {4, -1.0}}), std::runtime_error, "fit_loader: throughput must be positive and finite, got -1");
}

namespace {
const ComputeModel kTrueCompute{0.015, 7.8125e-13, 1.2e-9, 2e-9};  // c0, c_work, c_params, c_comm

std::vector<ComputeObs> synthetic_compute_traces() {
  struct Net {
    double flops, params;
  };
  // resnet18, resnet50, vgg11, googlenet (per-sample forward FLOPs, parameter counts).
  std::vector<Net> nets = {{1.8e9, 11.7e6}, {4.1e9, 25.6e6}, {7.6e9, 132.9e6}, {1.5e9, 6.8e6}};
  std::vector<ComputeObs> obs;
  int k = 0;
  for (const Net& n : nets)
    for (int devices : {1, 2, 4, 8})
      for (double bpd : {32.0, 64.0, 128.0}) {
        if (++k % 3 == 0) continue;  // a varied, incomplete grid
        ComputeObs o{bpd, n.flops, n.params, devices, 0};
        o.iteration_seconds = kTrueCompute.iteration_seconds(bpd, n.flops, n.params, devices);
        obs.push_back(o);
      }
  return obs;
}
}  // namespace

TEST(TorchloaderTpm, FitComputeRecoversKnownCoefficients) {
  auto obs = synthetic_compute_traces();
  ASSERT_GE(obs.size(), 12u);
  ComputeModel m = fit_compute(obs);
  EXPECT_NEAR(m.c0, kTrueCompute.c0, 1e-9 * kTrueCompute.c0 + 1e-12);
  EXPECT_NEAR(m.c_work, kTrueCompute.c_work, 1e-9 * kTrueCompute.c_work);
  EXPECT_NEAR(m.c_params, kTrueCompute.c_params, 1e-7 * kTrueCompute.c_params);
  EXPECT_NEAR(m.c_comm, kTrueCompute.c_comm, 1e-9 * kTrueCompute.c_comm);
  for (const ComputeObs& o : obs)
    EXPECT_NEAR(m.iteration_seconds(o.batch_per_device, o.flops, o.params, o.devices), o.iteration_seconds, 1e-12);
}

TEST(TorchloaderTpm, FitComputeWithNoiseStaysClose) {
  auto obs = synthetic_compute_traces();
  Gauss g;
  for (ComputeObs& o : obs) o.iteration_seconds *= 1 + 0.002 * g();
  ComputeModel m = fit_compute(obs);
  EXPECT_NEAR(m.c_work, kTrueCompute.c_work, 0.05 * kTrueCompute.c_work);
  EXPECT_NEAR(m.c_comm, kTrueCompute.c_comm, 0.05 * kTrueCompute.c_comm);
}

TEST(TorchloaderTpm, FitComputeRefusesTooFewOrDegenerateObservations) {
  auto obs = synthetic_compute_traces();
  obs.resize(3);
  try {
    fit_compute(obs);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 4"), std::string::npos) << e.what();
  }
  // Single-device runs only: the communication feature is always zero.
  std::vector<ComputeObs> single;
  for (double bpd : {16.0, 32.0, 64.0, 128.0, 256.0})
    for (double p : {1e6, 5e6}) single.push_back({bpd, 1e9, p, 1, 0.1 + bpd * 1e-3 + p * 1e-9});
  EXPECT_THROW_WITH(fit_compute(single), std::runtime_error,
                    "degenerate observations: feature (devices-1)*params is zero in every observation");
  // One model only: params is collinear with the constant.
  std::vector<ComputeObs> one_model;
  for (double bpd : {16.0, 32.0, 64.0})
    for (int d : {1, 2, 4}) one_model.push_back({bpd, 1e9, 5e6, d, 0.1 + bpd * 1e-3 + d * 1e-2});
  try {
    fit_compute(one_model);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("degenerate"), std::string::npos) << e.what();
  }
}

TEST(TorchloaderTpm, PredictDemandHandComputed) {
  // bpd = 256 / 2 = 128; t = 0.02 + 7.8125e-13*128*4e9 (0.4) + 2e-9*(2-1)*25e6 (0.05) + 1.2e-9*25e6 (0.03) = 0.5 s;
  // per-device compute throughput 128 / 0.5 = 256 samples/s, shared by 2 apps -> 128; one worker loads
  // 1 / (0.02 + 0.005) = 40 samples/s -> 3.2 workers per device -> demand floor(3.2) + 2 = 5, overload 0.2.
  ComputeModel c{0.02, 7.8125e-13, 1.2e-9, 2e-9};
  LoaderModel l{0.02, 0.005};
  Demand d = predict_demand(c, l, 256, 4e9, 25e6, 2, 2);
  EXPECT_NEAR(d.compute_samples_per_second, 128.0, 1e-9);
  EXPECT_NEAR(d.workers_per_device, 3.2, 1e-9);
  EXPECT_EQ(d.demand, 5);
  EXPECT_NEAR(d.overload, 0.2, 1e-9);
  EXPECT_THROW_WITH(predict_demand(c, l, 256, 4e9, 25e6, 0, 1), std::invalid_argument, "predict_demand: devices must be >= 1");
  EXPECT_THROW_WITH(predict_demand(c, l, 256, 4e9, 25e6, 2, 0), std::invalid_argument,
                    "predict_demand: apps sharing a device must be >= 1");
}

TEST(TorchloaderTpm, JsonRoundTripAndErrors) {
  ComputeModel c{0.0151234567890123, 7.8125e-13, 1.2345678901234e-9, 2.0000000000001e-9};
  LoaderModel l{0.0201, 0.00099};
  std::string s = to_json(c, l);
  ComputeModel c2;
  LoaderModel l2;
  from_json(s, c2, l2);
  EXPECT_EQ(c2.c0, c.c0);
  EXPECT_EQ(c2.c_work, c.c_work);
  EXPECT_EQ(c2.c_params, c.c_params);
  EXPECT_EQ(c2.c_comm, c.c_comm);
  EXPECT_EQ(l2.a, l.a);
  EXPECT_EQ(l2.b, l.b);

  auto error = [](const std::string& text) -> std::string {
    ComputeModel c;
    LoaderModel l;
    try {
      from_json(text, c, l);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(R"({"compute":{"c0":1,"c_work":1,"c_params":1,"c_comm":1},"loader":{"a":1}})").find(
                "missing key 'loader.b'"),
            std::string::npos);
  EXPECT_NE(error(R"({"loader":{"a":1,"b":2}})").find("missing key 'compute'"), std::string::npos);
  EXPECT_NE(error(R"({"compute":{"c0":1,"c_work":"x","c_params":1,"c_comm":1},"loader":{"a":1,"b":2}})").find(
                "'compute.c_work' is not a number"),
            std::string::npos);
  EXPECT_NE(error("{not json").find("parse error"), std::string::npos);
  EXPECT_NE(error("[1,2]").find("not an object"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------- WAA

TEST(TorchloaderWaa, DemandExceedsCores) {
  // Needs 6*2 + 5*2 + 4*2 = 30 > 16 cores. Order by overload: app 3 (.9), app 1 (.7), app 2 (.2).
  // Floor (first turn): 2 each -> 3:2 1:2 2:2, 10 left. Turn 2: 3:4 1:4 2:4, 4 left. Turn 3: 3:6 1:6, 0 left.
  // Expected: {1: 6, 2: 4, 3: 6}.
  std::vector<AppDemand> apps = {{1, 2, 6, 0.7, 100}, {2, 2, 5, 0.2, 100}, {3, 2, 4, 0.9, 100}};
  EXPECT_EQ(allocate(apps, 16), (std::map<int, int>{{1, 6}, {2, 4}, {3, 6}}));

  // 17 cores: the last core cannot make a full turn (2 devices): it goes to the first app still below its
  // need, app 3 (6 < 8) -> {1: 6, 2: 4, 3: 7}.
  EXPECT_EQ(allocate(apps, 17), (std::map<int, int>{{1, 6}, {2, 4}, {3, 7}}));

  // Ties on overload go to the larger demand, then the lower id. Order: 3 (.9), 1 (.5, demand 6), 2 (.5, 5).
  // 22 cores: floor 3:2 1:2 2:2 (16 left); 3:4 1:4 2:4 (10 left); 3:6 1:6 2:6 (4 left); 3:8 1:8 (0 left).
  std::vector<AppDemand> tied = {{1, 2, 6, 0.5, 1}, {2, 2, 5, 0.5, 1}, {3, 2, 4, 0.9, 1}};
  EXPECT_EQ(allocate(tied, 22), (std::map<int, int>{{1, 8}, {2, 6}, {3, 8}}));
  // 26 cores: ... 3:8 1:8 2:8 (2 left); app 3 is done at 4*2 = 8, so 1:10 (0 left).
  EXPECT_EQ(allocate(tied, 26), (std::map<int, int>{{1, 10}, {2, 8}, {3, 8}}));
  // 28 cores: ... 3:8 1:8 2:8 (4 left); 1:10 2:10 (0 left).
  EXPECT_EQ(allocate(tied, 28), (std::map<int, int>{{1, 10}, {2, 10}, {3, 8}}));
  // Same overload and demand: the lower id first. 5 cores, 1 device each: 1:1 2:1 (3 left); 1:2 2:2; 1:3.
  std::vector<AppDemand> same = {{2, 1, 4, 0.5, 1}, {1, 1, 4, 0.5, 1}};
  EXPECT_EQ(allocate(same, 5), (std::map<int, int>{{1, 3}, {2, 2}}));
}

TEST(TorchloaderWaa, PartialTurnsAndShortCores) {
  // App 1: 4 devices, demand 3 (need 12), overload .8; app 2: 1 device, demand 5 (need 5), overload .1.
  // 11 cores: floor 4 + 1 (6 left); turn: 1:8 2:2 (1 left); next turn app 1 cannot take 4 -> skipped, 2:3
  // (0 left). Expected {1: 8, 2: 3}.
  std::vector<AppDemand> apps = {{1, 4, 3, 0.8, 1}, {2, 1, 5, 0.1, 1}};
  EXPECT_EQ(allocate(apps, 11), (std::map<int, int>{{1, 8}, {2, 3}}));
  // 14 cores: floor (9 left); 1:8 2:2 (4 left); 1:12 (0 left) -> {1: 12, 2: 2}.
  EXPECT_EQ(allocate(apps, 14), (std::map<int, int>{{1, 12}, {2, 2}}));
  // 16 cores: floor (11 left); 1:8 2:2 (6); 1:12 2:3 (1); 2:4 (0) -> {1: 12, 2: 4}.
  EXPECT_EQ(allocate(apps, 16), (std::map<int, int>{{1, 12}, {2, 4}}));
  // 7 cores, app 1 can take 4 but no second turn; 2 gets the rest one turn at a time: floor 4+1 (2 left),
  // turn: 1 skipped (needs 4), 2:2 (1 left); turn: 2:3 (0 left) -> {1: 4, 2: 3}.
  EXPECT_EQ(allocate(apps, 7), (std::map<int, int>{{1, 4}, {2, 3}}));
  // 3 cores < 5 devices: 1 each, then app 1 (higher overload) the last one -> {1: 2, 2: 1}.
  EXPECT_EQ(allocate(apps, 3), (std::map<int, int>{{1, 2}, {2, 1}}));
  // 1 core < 2 apps: still 1 each (oversubscribed).
  EXPECT_EQ(allocate(apps, 1), (std::map<int, int>{{1, 1}, {2, 1}}));
}

TEST(TorchloaderWaa, DemandBelowCoresIsProportionalThenByThroughput) {
  // Needs 3*2 = 6, 4*1 = 4, 2*1 = 2 (12 in all); 23 cores: floor(23*6/12) = 11, floor(23*4/12) = 7,
  // floor(23*2/12) = 3 -> 21, 2 left -> by throughput: app 2 (300) then app 3 (200). Expected {1: 11, 2: 8, 3: 4}.
  std::vector<AppDemand> apps = {{1, 2, 3, 0.5, 100}, {2, 1, 4, 0.5, 300}, {3, 1, 2, 0.5, 200}};
  EXPECT_EQ(allocate(apps, 23), (std::map<int, int>{{1, 11}, {2, 8}, {3, 4}}));
  // Exactly enough: everyone gets its need.
  EXPECT_EQ(allocate(apps, 12), (std::map<int, int>{{1, 6}, {2, 4}, {3, 2}}));
  // 20 cores: 10, 6, 3 -> 1 left to app 2.
  EXPECT_EQ(allocate(apps, 20), (std::map<int, int>{{1, 10}, {2, 7}, {3, 3}}));
}

TEST(TorchloaderWaa, EvenSplitWithRemainder) {
  std::vector<AppDemand> apps = {{7, 1, 3, 0, 0}, {3, 2, 3, 0, 0}, {5, 1, 3, 0, 0}, {9, 4, 3, 0, 0}};
  // 10 / 4 = 2 each, remainder 2 to the lowest ids 3 and 5.
  EXPECT_EQ(even_split(apps, 10), (std::map<int, int>{{3, 3}, {5, 3}, {7, 2}, {9, 2}}));
  EXPECT_EQ(even_split(apps, 2), (std::map<int, int>{{3, 1}, {5, 1}, {7, 1}, {9, 1}}));
  EXPECT_TRUE(even_split({}, 10).empty());
}

TEST(TorchloaderWaa, Modes) {
  EXPECT_FALSE(reallocates(Mode::EvenSplit, true));
  EXPECT_FALSE(reallocates(Mode::EvenSplit, false));
  EXPECT_TRUE(reallocates(Mode::OnArrival, true));
  EXPECT_FALSE(reallocates(Mode::OnArrival, false));
  EXPECT_TRUE(reallocates(Mode::OnArrivalAndCompletion, true));
  EXPECT_TRUE(reallocates(Mode::OnArrivalAndCompletion, false));
}

TEST(TorchloaderWaa, RefusesBadInput) {
  EXPECT_THROW_WITH(allocate({{1, 1, 2, 0, 0}, {1, 1, 2, 0, 0}}, 8), std::invalid_argument, "allocate: duplicate app id 1");
  EXPECT_THROW_WITH(allocate({{1, 0, 2, 0, 0}}, 8), std::invalid_argument, "allocate: app 1: devices must be >= 1");
  EXPECT_THROW_WITH(allocate({{1, 1, 0, 0, 0}}, 8), std::invalid_argument, "allocate: app 1: demand must be >= 1");
  EXPECT_THROW_WITH(allocate({{1, 1, 2, 0, 0}}, -1), std::invalid_argument, "allocate: cores must be >= 0, got -1");
  EXPECT_TRUE(allocate({}, 8).empty());
}

TEST(TorchloaderWaa, InvariantsOverRandomCases) {
  std::mt19937 rng(2022);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1)); };
  for (int iter = 0; iter < 1000; ++iter) {
    int n = pick(1, 8);
    std::vector<AppDemand> apps;
    long long need = 0, devices = 0;
    for (int i = 0; i < n; ++i) {
      AppDemand a{pick(0, 1000) * 10 + i, pick(1, 4), pick(1, 12), pick(0, 99) / 100.0, pick(1, 4) * 50.0};
      need += static_cast<long long>(a.demand) * a.devices;
      devices += a.devices;
      apps.push_back(a);
    }
    int cores = pick(0, 120);
    SCOPED_TRACE("case " + std::to_string(iter) + ": " + std::to_string(n) + " apps, " + std::to_string(cores) +
                 " cores, need " + std::to_string(need));
    for (bool even : {false, true}) {
      auto alloc = even ? even_split(apps, cores) : allocate(apps, cores);
      ASSERT_EQ(alloc.size(), apps.size());
      long long sum = 0;
      int lo = 1 << 30, hi = 0;
      for (const AppDemand& a : apps) {
        ASSERT_TRUE(alloc.count(a.id));
        int w = alloc[a.id];
        EXPECT_GE(w, 1);
        sum += w;
        lo = std::min(lo, w);
        hi = std::max(hi, w);
        if (!even && cores >= devices) {
          EXPECT_GE(w, a.devices) << "app " << a.id;  // >= 1 per device
        }
        if (!even && need > cores) {
          EXPECT_LE(w, std::max(1, a.demand * a.devices)) << "app " << a.id;
        }
        if (!even && need <= cores) {
          EXPECT_GE(w, a.demand * a.devices) << "app " << a.id;
        }
      }
      if (cores >= n) {
        EXPECT_LE(sum, cores);
        EXPECT_EQ(sum, cores);  // no core left idle
      }
      if (even && cores >= n) {
        EXPECT_LE(hi - lo, 1);
      }
    }
  }
}
