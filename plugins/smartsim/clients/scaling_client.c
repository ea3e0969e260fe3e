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

/* Clock readings are kept and written a chunk at a time, as the Fortran and Python clients do: formatting samples
 * between the timed calls would lengthen the gap the server idles in, and each language's formatting cost would
 * show in its put times. */
enum { kChunk = 1024 };

static void write_loop_samples(long long first, long long count, const int64_t (*clocks)[3], size_t bytes) {
  for (long long k = 0; k < count; ++k) {
    const int64_t* c = clocks[k];
    sample("put_tensor", first + k, c[0], seconds(c[0], c[1]), "s");
    sample("unpack_tensor", first + k, c[1], seconds(c[1], c[2]), "s");
    sample("loop_time", first + k, c[0], seconds(c[0], c[2]), "s");
    sample("loop_bandwidth", first + k, c[0], 2.0 * (double)bytes / seconds(c[0], c[2]), "bytes/s"); /* put + read back */
  }
}

static void throughput(int rank, size_t elements, long long iterations, long long warmup) {
  const size_t bytes = elements * sizeof(float), dims[1] = {elements};
  float* out = malloc(bytes);
  float* back = malloc(bytes);
  int64_t(*clocks)[3] = malloc(sizeof(int64_t[kChunk][3]));
  if (!out || !back || !clocks) fail("out of memory");
  for (size_t i = 0; i < elements; ++i) out[i] = (float)rank + (float)i * 0.5f;
  char key[64];
  snprintf(key, sizeof key, "throughput_rank_%d", rank);
  long long first = -warmup;
  for (long long i = -warmup; i < iterations; ++i) {
    int64_t* c = clocks[i - first];
    c[0] = fanout_tc_monotonic_ns();
    if (fanout_tc_put_tensor(client, key, out, dims, 1, FANOUT_TC_FLOAT) != 0) fail("put_tensor");
    c[1] = fanout_tc_monotonic_ns();
    if (fanout_tc_unpack_tensor(client, key, back, dims, 1, FANOUT_TC_FLOAT) != 0) fail("unpack_tensor");
    c[2] = fanout_tc_monotonic_ns();
    if (i == -warmup && memcmp(out, back, bytes) != 0) fail("unpacked tensor differs from the one put");
    if (i - first + 1 == kChunk || i == iterations - 1) {
      write_loop_samples(first, i - first + 1, (const int64_t(*)[3])clocks, bytes);
      first = i + 1;
    }
  }
  free(out);
  free(back);
  free(clocks);
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
