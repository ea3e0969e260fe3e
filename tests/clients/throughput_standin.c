/* A stand-in for SmartSim-Scaling's C++ throughput client (cpp-throughput/throughput_scaling.cpp), on fanout's C
 * tensor client instead of SmartRedis and without MPI, for the exec plugin's tests: it writes rank_<r>_timing.csv
 * in its working folder line for line as the original does ("rank,function,seconds"; client(), then put_tensor and
 * unpack_tensor per iteration, loop_time, main(); seconds as C++'s default stream format, %g with 6 digits).
 * Like the original: the tensor size in bytes is argv[1], the iterations SS_ITERATIONS (100), the database SSDB
 * and SR_DB_TYPE; the rank is the MPI rank when an MPI launcher started it (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK:
 * `mpirun -np 2 ./throughput` as the original runs), else FANOUT_RANK. The original's MPI barriers are left out:
 * each rank's loop is timed on its own in both. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fanout_tensor_client.h"

static double wtime(void) { /* MPI_Wtime: seconds on a monotonic clock */
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "The number tensor size in bytes must be provided as a command line argument.\n");
    return 1;
  }
  const double main_start = wtime();
  const size_t n_bytes = (size_t)atol(argv[1]), n_values = n_bytes / sizeof(float);
  const char* it_text = getenv("SS_ITERATIONS");
  const int iterations = it_text ? atoi(it_text) : 100;
  const char* rank_text = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank_text) rank_text = getenv("PMI_RANK");
  if (!rank_text) rank_text = getenv("PMIX_RANK");
  if (!rank_text) rank_text = getenv("FANOUT_RANK");
  const int rank = rank_text ? atoi(rank_text) : 0;
  char name[64];
  snprintf(name, sizeof name, "rank_%d_timing.csv", rank);
  FILE* timing = fopen(name, "w");
  if (!timing) return 1;
  if (rank == 0) printf("Running throughput scaling test with tensor size of %zubytes.\n", n_bytes);

  double t0 = wtime();
  fanout_tc* client = fanout_tc_connect_env();
  if (!client) {
    fprintf(stderr, "throughput_standin: %s\n", fanout_tc_error(NULL));
    return 1;
  }
  fprintf(timing, "%d,client(),%g\n", rank, wtime() - t0);

  float* array = malloc(n_values * sizeof(float) + 1);
  float* result = malloc(n_values * sizeof(float) + 1);
  double* put_times = malloc(sizeof(double) * (size_t)(iterations + 1));
  double* unpack_times = malloc(sizeof(double) * (size_t)(iterations + 1));
  for (size_t i = 0; i < n_values; ++i) array[i] = (float)i;
  const size_t dims[2] = {1, n_values};
  snprintf(name, sizeof name, "throughput_rank_%d", rank);
  const double loop_start = wtime();
  for (int i = 0; i < iterations; ++i) {
    double a = wtime();
    if (fanout_tc_put_tensor(client, name, array, dims, 2, FANOUT_TC_FLOAT) != 0) goto failed;
    double b = wtime();
    /* The original unpacks into {n_values}; this client checks the shape as stored, {1, n_values}. */
    if (fanout_tc_unpack_tensor(client, name, result, dims, 2, FANOUT_TC_FLOAT) != 0) goto failed;
    double c = wtime();
    put_times[i] = b - a, unpack_times[i] = c - b;
  }
  const double loop_time = wtime() - loop_start;
  for (int i = 0; i < iterations; ++i) {
    fprintf(timing, "%d,put_tensor,%g\n", rank, put_times[i]);
    fprintf(timing, "%d,unpack_tensor,%g\n", rank, unpack_times[i]);
  }
  fprintf(timing, "%d,loop_time,%g\n", rank, loop_time);
  if (rank == 0) printf("Finished throughput test.\n");
  fprintf(timing, "%d,main(),%g\n", rank, wtime() - main_start);
  fclose(timing);
  fanout_tc_free(client);
  return 0;
failed:
  fprintf(stderr, "throughput_standin: %s\n", fanout_tc_error(client));
  return 1;
}
