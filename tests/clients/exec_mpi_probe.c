/* exec_mpi_probe: an MPI program for the exec plugin's mpi_program tests (tests/slurm_test.cpp). Each rank prints
 * what it learnt from MPI, so the test can tell that MPI_COMM_WORLD is the step's ranks and in the step's order:
 *   world <size of MPI_COMM_WORLD> ranks
 *   sum <MPI_Allreduce of the ranks> ranks      (0 + 1 + ... + size-1 only when every rank took part)
 *   rank_match <1 when the MPI rank is FANOUT_RANK, else 0> count
 *   allreduce_us <mean time of one 8-byte MPI_Allreduce over 200, after 20 not counted> us
 * Usage: exec_mpi_probe */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const char* fanout_rank = getenv("FANOUT_RANK");
  double x = 1.0, y = 0.0;
  for (int i = 0; i < 20; ++i) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < 200; ++i) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double t1 = MPI_Wtime();
  printf("world %d ranks\nsum %ld ranks\nrank_match %d count\nallreduce_us %.3f us\n", size, sum, fanout_rank && atoi(fanout_rank) == rank,
         (t1 - t0) / 200 * 1e6);
  MPI_Finalize();
  return 0;
}
