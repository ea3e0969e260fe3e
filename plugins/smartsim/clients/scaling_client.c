/* fanout-tensor-client-c: SmartSim-Scaling's throughput and aggregation-producer clients in C, on the tensor
 * client's C API. The smartsim plugin starts it for --languages=c and records what it reports.
 *
 * Usage: fanout-tensor-client-c MODE RANK TENSOR_BYTES ITERATIONS WARMUP TENSORS_PER_DATASET
 *   MODE: throughput (put_tensor + unpack_tensor per iteration) or producer (put_dataset + append_to_list).
 * The database comes from SSDB / SR_DB_TYPE / SR_DB_PASSWORD (fanout_tc_connect_env).
 * Standard output, one line each (language_client.h): "S metric iteration t0_ns value unit" per sample
 * (iteration < 0: warmup); a producer writes "W k" before iteration k and waits for "G" on standard input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fanout_tensor_client.h"

static fanout_tc* client;

static void fail(const char* what) {
  fprintf(stderr, "fanout-tensor-client-c: %s: %s\n", what, fanout_tc_error(client));
  exit(1);
}

static void sample(const char* metric, long long i, int64_t t0, double value, const char* unit) {
  if (printf("S %s %lld %lld %.17g %s\n", metric, i, (long long)t0, value, unit) < 0) fail("the rank stopped reading");
}

static double seconds(int64_t a, int64_t b) { return (double)(b - a) / 1e9; }

static void throughput(int rank, size_t elements, long long iterations, long long warmup) {
  const size_t bytes = elements * sizeof(float), dims[1] = {elements};
  float* out = malloc(bytes);
  float* back = malloc(bytes);
  if (!out || !back) fail("out of memory");
  for (size_t i = 0; i < elements; ++i) out[i] = (float)rank + (float)i * 0.5f;
  char key[64];
  snprintf(key, sizeof key, "throughput_rank_%d", rank);
  for (long long i = -warmup; i < iterations; ++i) {
    int64_t t0 = fanout_tc_monotonic_ns();
    if (fanout_tc_put_tensor(client, key, out, dims, 1, FANOUT_TC_FLOAT) != 0) fail("put_tensor");
    int64_t t1 = fanout_tc_monotonic_ns();
    if (fanout_tc_unpack_tensor(client, key, back, dims, 1, FANOUT_TC_FLOAT) != 0) fail("unpack_tensor");
    int64_t t2 = fanout_tc_monotonic_ns();
    if (i == -warmup && memcmp(out, back, bytes) != 0) fail("unpacked tensor differs from the one put");
    sample("put_tensor", i, t0, seconds(t0, t1), "s");
    sample("unpack_tensor", i, t1, seconds(t1, t2), "s");
    sample("loop_time", i, t0, seconds(t0, t2), "s");
    sample("loop_bandwidth", i, t0, 2.0 * (double)bytes / seconds(t0, t2), "bytes/s"); /* put + read back */
  }
  free(out);
  free(back);
}

static void producer(int rank, size_t elements, long long iterations, long long warmup, int tensors) {
  const size_t dims[1] = {elements};
  float* data = malloc(elements * sizeof(float));
  const char** names = calloc((size_t)tensors, sizeof *names);
  const void** views = calloc((size_t)tensors, sizeof *views);
  char (*name_text)[32] = calloc((size_t)tensors, sizeof *name_text);
  if (!data || !names || !views || !name_text) fail("out of memory");
  for (size_t i = 0; i < elements; ++i) data[i] = (float)rank;
  for (int t = 0; t < tensors; ++t) {
    snprintf(name_text[t], sizeof name_text[t], "tensor_%d", t);
    names[t] = name_text[t];
    views[t] = data;
  }
  char dataset[64], list[64], go[16];
  snprintf(dataset, sizeof dataset, "aggregation_rank_%d", rank);
  for (long long k = 0; k < warmup + iterations; ++k) {
    printf("W %lld\n", k);
    fflush(stdout);
    if (!fgets(go, sizeof go, stdin) || go[0] != 'G') fail("the rank stopped the producer");
    snprintf(list, sizeof list, "iteration_%lld", k);
    int64_t t0 = fanout_tc_monotonic_ns();
    if (fanout_tc_put_dataset(client, dataset, (size_t)tensors, names, views, dims, 1, FANOUT_TC_FLOAT) != 0) fail("put_dataset");
    int64_t t1 = fanout_tc_monotonic_ns();
    if (fanout_tc_append_to_list(client, list, dataset) != 0) fail("append_to_list");
    sample("put_dataset", k - warmup, t0, seconds(t0, t1), "s");
    sample("append_to_list", k - warmup, t1, seconds(t1, fanout_tc_monotonic_ns()), "s");
  }
  free(data);
  free(names);
  free(views);
  free(name_text);
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s throughput|producer RANK TENSOR_BYTES ITERATIONS WARMUP TENSORS_PER_DATASET\n", argv[0]);
    return 2;
  }
  const int rank = atoi(argv[2]);
  const long long tensor_bytes = atoll(argv[3]), iterations = atoll(argv[4]), warmup = atoll(argv[5]);
  const int tensors = atoi(argv[6]) < 1 ? 1 : atoi(argv[6]);
  const size_t elements = tensor_bytes / 4 < 1 ? 1 : (size_t)(tensor_bytes / 4);
  int64_t t0 = fanout_tc_monotonic_ns();
  client = fanout_tc_connect_env();
  if (!client) fail("connect");
  sample("client()", 0, t0, seconds(t0, fanout_tc_monotonic_ns()), "s");
  if (strcmp(argv[1], "throughput") == 0) throughput(rank, elements, iterations, warmup);
  else if (strcmp(argv[1], "producer") == 0) producer(rank, elements, iterations, warmup, tensors);
  else {
    fprintf(stderr, "fanout-tensor-client-c: unknown mode '%s'\n", argv[1]);
    return 2;
  }
  fanout_tc_free(client);
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
